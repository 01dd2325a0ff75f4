"""Repeats until the answer is known, for a flag sweep (`rig sweep flags --until-known`): which
configurations run which cells again, decided from the runs already measured. The rule is the
race's, loadtest/known.py; this module only says what a heat and a run are in a sweep.

- a heat: one workload at one user count; its competitors: the matrix's engine configurations
  (a thread sweep has one configuration and nothing to compare: it refuses --until-known);
- a configuration's runs of a heat: its measured cells' runs.csv rows that rank (every request
  answered, verdict not invalid), output tok/s each, the race's figure;
- a repeat: one more cell, the configuration's next repeat number (u8-r3 after u8-r2), with its
  own cell id (loadtest/sweep/cells.py), so a re-run of the same command replays the same
  decisions on the runs recorded and measures only what is missing (loadtest/sweep/state.py).

Nothing here starts or reads anything (loadtest/sweep/runner.py does): tested on made-up rows
(tests/test_sweep_known.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loadtest.known import DEFAULT_MAX_REPEATS, Standing, more_runs, repeat_plan, standing
from loadtest.sweep.cells import Cell
from loadtest.sweep.matrix import EngineConfig, Matrix, MatrixError

__all__ = ["Heat", "Plan", "UntilKnown", "check_until_known", "heat_of", "heat_samples",
           "known_lines", "known_rows", "next_pass"]

Plan = list[tuple[EngineConfig, str, list[Cell]]]
Heat = tuple[str, int]  # (workload label, "" for the one `workload:`; user count)
FIGURE = "output_tok_per_s"


@dataclass(frozen=True)
class UntilKnown:
    """--until-known and its caps, as the race reads them (loadtest/race/args.py)."""
    max_repeats: int = DEFAULT_MAX_REPEATS  # runs of one heat by one configuration at most
    max_time_s: float | None = None  # no repeat leg starts after this long since the sweep began
    resolve_pct: float | None = None  # runs needed for this difference; None: the one observed

    def describe(self) -> str:
        time = f", no repeat after {self.max_time_s:g} s" if self.max_time_s is not None else ""
        return f"more until known (at most {self.max_repeats} runs per cell{time})"


def check_until_known(matrix: Matrix, until: UntilKnown) -> None:
    """Refuse (MatrixError, one line) a matrix --until-known cannot work on."""
    if len(matrix.configs) < 2:
        raise MatrixError("--until-known compares configurations at each user count; this matrix "
                          "has one: nothing to compare (add a `sweep:` value or an engine)")
    if matrix.repeats > until.max_repeats:
        raise MatrixError(f"--max-repeats {until.max_repeats} is below the matrix's repeats: "
                          f"{matrix.repeats} (the cap counts every run of a cell)")


def heat_of(cell: Cell) -> Heat:
    return (cell.workload.label if cell.workload is not None else "", cell.users)


def heat_samples(plan: Plan, rows: Mapping[str, Mapping[str, str]]
                 ) -> dict[Heat, dict[str, list[float]]]:
    """{heat: {configuration: output tok/s of each ranked run}}, heats in the plan's order.
    ``rows``: the runs.csv row of each measured cell, by cell id."""
    heats: dict[Heat, dict[str, list[float]]] = {}
    for _, slug, cells in plan:
        for cell in cells:
            runs = heats.setdefault(heat_of(cell), {})
            figure = _ranked_figure(rows.get(cell.cell_id))
            if figure is not None:
                runs.setdefault(slug, []).append(figure)
    return dict(sorted(heats.items()))


def next_pass(plan: Plan, heats: Mapping[Heat, Mapping[str, Sequence[float]]],
              until: UntilKnown, again: Callable[[Cell], Cell]) -> Plan:
    """This pass's legs, [(configuration, folder, the new cells it runs)] in the plan's order:
    each unknown heat's contenders (loadtest/known.py), one cell more each (``again`` makes a
    cell's next repeat), none past --max-repeats cells of a heat."""
    wanted = dict(repeat_plan(heats, [slug for _, slug, _ in plan], until.max_repeats))
    legs: Plan = []
    for config, slug, cells in plan:
        new = []
        for heat in wanted.get(slug, ()):
            last = max((c for c in cells if heat_of(c) == heat), key=lambda c: c.repeat)
            if last.repeat < until.max_repeats:
                new.append(again(last))
        if new:
            legs.append((config, slug, new))
    return legs


def known_rows(heats: Mapping[Heat, Mapping[str, Sequence[float]]], configs: Sequence[str],
               until: UntilKnown) -> list[dict[str, Any]]:
    """known.csv: one row per heat and configuration (runs 0: none ranked)."""
    rows = []
    for (label, users), samples in heats.items():
        heat = standing(samples) if samples else None
        target = _target(heat, until)
        more = more_runs(heat, target) if heat is not None and not heat.known else None
        for slug in configs:
            runs = samples.get(slug, [])
            rows.append({
                "workload": label, "users": users, "config": slug, "runs": len(runs),
                "mean_output_tok_per_s": _round(statistics.fmean(runs)) if runs else "",
                "sd_output_tok_per_s": _round(statistics.stdev(runs)) if len(runs) > 1 else "",
                "leader": heat.leader if heat else "", "known": bool(heat and heat.known),
                "heat_runs": sum(heat.runs.values()) if heat else 0,
                "ahead_pct": _round(heat.ahead_pct) if heat and heat.runner_up else "",
                "resolve_pct": _round(target) if more else "", "more_runs_each": more or ""})
    return rows


def known_lines(heats: Mapping[Heat, Mapping[str, Sequence[float]]], configs: Sequence[str],
                until: UntilKnown) -> list[str]:
    """One line per heat: the leader, known after how many runs, or about how many more each
    would resolve --resolve-pct (default: the difference observed)."""
    lines = []
    for (label, users), samples in heats.items():
        where = f"until known, {users} {'user' if users == 1 else 'users'}" \
                + (f" ({label})" if label else "")
        unranked = [slug for slug in configs if slug not in samples]
        if not samples:
            lines.append(f"{where}: no ranked run")
            continue
        none = f"; no ranked run: {', '.join(unranked)}" if unranked else ""
        lines.append(f"{where}: {_verdict(standing(samples), until)}{none}")
    return lines


def _verdict(heat: Standing, until: UntilKnown) -> str:
    runs = sum(heat.runs.values())
    if heat.runner_up is None:
        return f"{heat.leader} alone ({runs} runs): nothing to compare"
    counts = "/".join(str(n) for n in heat.runs.values())
    lead = (f"{heat.leader} leads {heat.runner_up} by {heat.ahead_pct:.1f}% "
            f"({heat.leader_mean:.0f} vs {heat.runner_up_mean:.0f} output tok/s; runs {counts} "
            f"of {', '.join(heat.runs)})")
    if heat.known:
        return f"{lead}: known after {runs} runs (the 95% t-interval on its lead excludes 0)"
    target = _target(heat, until)
    more = more_runs(heat, target)
    why = (f"about {more} more each would resolve {target:.1f}%; spread {heat.spread:.0f} tok/s"
           if more else "no spread to judge by yet")
    return f"{lead}: not known after {runs} runs ({why})"


def _target(heat: Standing | None, until: UntilKnown) -> float:
    if until.resolve_pct is not None:
        return until.resolve_pct
    return heat.ahead_pct if heat is not None and heat.runner_up else math.nan


def _ranked_figure(row: Mapping[str, str] | None) -> float | None:
    """The row's output tok/s when the run ranks (as the race ranks): every request answered,
    verdict not invalid, a finite figure above 0."""
    if row is None or (row.get("failed") or "0") != "0" \
            or (row.get("verdict") or "").strip().lower() == "invalid":
        return None
    try:
        figure = float(row.get(FIGURE) or "nan")
    except ValueError:
        return None
    return figure if math.isfinite(figure) and figure > 0 else None


def _round(value: float) -> float:
    return round(value, 2)
