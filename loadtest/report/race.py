"""The race: which engine finishes the same workload fastest at each user count, from runs.csv.

- Engines race in heats: one workload (workload_sha256) at one user count. Every engine in a
  heat ran the same requests; nothing is compared across heats, so runs of different workloads
  never race each other, even at the same user count (a table holding several workloads says
  which row ran which).
- A run whose `verdict` is `invalid` (see its `verdict_reasons`) is shown apart and never
  ranked; a missing verdict counts as valid. A cell with failed requests did not finish the
  workload: it is shown but not ranked either.
- A winner is named only among the ranked (valid, every request answered) cells of at least
  two contenders: a heat where one is left is undecided, and its line says why each other
  contender is not ranked (an invalid run and its reasons, failed requests, did not run), e.g.
  "at 32 users: undecided — vllm-cpu's run was short_run (invalid); only llamacpp-cpu ranked".
- The fastest in a heat is the cell with the highest mean output tok/s. Against the
  runner-up it is called only when the two differ by more than both repeat spreads added (the
  report's flag-effect rule, pyperf's "not significant" in spirit); with a single run on either
  side there is no spread to judge by, so the winner is named with "single run" beside it.
- A lead is only as good as the two runs behind it: where the leader or the runner-up carries a
  warning that says something other than the engine may have set its number (RANKING_DOUBTS: a
  saturated front end or client, another client on the engine, a prefix cache left warm), the
  winner's line names it beside the lead, so that nobody quotes the lead without it.
- Only equal work is raced: where the leader's and the runner-up's answers differ in mean length
  by more than OUTPUT_SPREAD_PCT of the longer (a real model stopping at its own end of answer,
  not --ignore-eos's), tok/s compares different work and no winner is called ("unequal work").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from loadtest.report.options import options_cell, shown_options
from loadtest.report.plots import config_label
from loadtest.report.runset import CONFIG
from loadtest.report.tables import _number, _spread, heat_cells, markdown_table
from loadtest.results.rules import OUTPUT_SPREAD_PCT

__all__ = [
    "RANKING_DOUBTS",
    "Winner",
    "invalid_markdown",
    "race_cells",
    "race_markdown",
    "split_invalid",
    "winner_line",
    "winners",
]


# Warnings (loadtest/results/rules.py) that put the ranking itself in doubt: the number may be
# the front end's, the client's, another client's or a warm cache's rather than the engine's.
RANKING_DOUBTS = ("front_end_saturated", "client_cpu_high", "engine_shared", "prefix_cache_not_reset")


@dataclass(frozen=True)
class Winner:
    """The outcome of one heat: `name` leads; `runner_up` is None when it was ranked alone, and
    the heat is then undecided (`unranked`: why each other contender is not ranked)."""
    users: float
    workload: str
    name: str
    tok_s: float
    runner_up: str | None = None
    runner_up_tok_s: float = np.nan
    significant: bool = True  # False: within the repeats' spread, no winner is called
    single_run: bool = False  # the leader or the runner-up has one run: no spread to judge by
    unranked: tuple[str, ...] = ()  # e.g. "vllm-cpu's run was short_run (invalid)"
    # the two answered at lengths too far apart to race: mean output tokens, leader's and runner-up's
    unequal_work: tuple[float, float] | None = None
    # the leader's and the runner-up's RANKING_DOUBTS, e.g. ("aphrodite: front_end_saturated",)
    doubts: tuple[str, ...] = ()

    @property
    def decided(self) -> bool:
        """A winner is named only among at least two ranked contenders."""
        return self.runner_up is not None

    @property
    def ratio(self) -> float:
        return self.tok_s / self.runner_up_tok_s if self.runner_up else np.nan


def split_invalid(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(valid, invalid) runs by the `verdict` column; no column or an empty cell is valid."""
    if "verdict" not in runs:
        return runs, runs.iloc[0:0]
    invalid = runs["verdict"].astype(str).str.strip().str.lower() == "invalid"
    return runs[~invalid], runs[invalid]


def race_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per cell of the valid runs of each workload (cell_table's columns, with
    `workload_sha256` and `workload`) plus `name`, the configuration as the race names it: the
    engine alone when each engine ran with one set of flags and gpu."""
    valid, _ = split_invalid(runs)
    if valid.empty:
        return pd.DataFrame()
    cells = heat_cells(valid)
    configs = cells.drop_duplicates(CONFIG)
    by_engine = configs["engine"].value_counts()
    # a name is the race's identity for a configuration: options that would read alike
    # shortened (the same first and last of many adapters) name it whole (shown_options)
    shown = shown_options(cells["flags"])
    cells["name"] = [str(r["engine"]) if by_engine[r["engine"]] == 1
                     else config_label(r, shown[r["flags"]]) for _, r in cells.iterrows()]
    return cells


def winners(cells: pd.DataFrame, invalid: pd.DataFrame | None = None,
            failed: dict[str, str] | None = None) -> dict[tuple[str, float], Winner]:
    """The fastest ranked cell of each heat, keyed (workload_sha256, users), in users order
    (cells that failed requests are not ranked). A heat with one ranked cell is undecided: its
    Winner has no runner-up, and `unranked` says why each other contender of the heat is not
    ranked, from the heat's cells that failed requests, its `invalid` runs (split_invalid) and
    the engines that did not run (`failed`: engine -> why)."""
    result: dict[tuple[str, float], Winner] = {}
    if cells.empty:
        return result
    ranked = cells[cells["failed"] == 0].sort_values(["users", "workload"], kind="stable")
    for (sha, users), same in ranked.groupby(["workload_sha256", "users"], sort=False):
        order = same.sort_values("tok_s_mean", ascending=False)
        best = order.iloc[0]
        workload = str(best["workload"])
        if len(order) == 1:
            heat = cells[(cells["workload_sha256"] == sha) & (cells["users"] == users)]
            result[sha, users] = Winner(
                users, workload, best["name"], best["tok_s_mean"], single_run=best["runs"] < 2,
                unranked=_unranked(heat, best, invalid, failed or {}))
            continue
        second = order.iloc[1]
        single = best["runs"] < 2 or second["runs"] < 2
        spread = best["tok_s_sd"] + second["tok_s_sd"]
        unequal = _unequal_work(best, second)
        significant = unequal is None and (single or best["tok_s_mean"] - second["tok_s_mean"] > spread)
        result[sha, users] = Winner(users, workload, best["name"], best["tok_s_mean"],
                                    second["name"], second["tok_s_mean"], significant, single,
                                    unequal_work=unequal, doubts=_doubts(best, second))
    return result


def _doubts(*cells: pd.Series) -> tuple[str, ...]:
    """Each cell's RANKING_DOUBTS among its warnings, as "NAME: WARNING[, WARNING]"."""
    found = []
    for cell in cells:  # a cell's warnings: its repeats' names, ";"-joined (tables.py)
        names = [name for name in str(cell.get("warnings") or "").split(";") if name in RANKING_DOUBTS]
        if names:
            found.append(f"{cell['name']}: {', '.join(names)}")
    return tuple(found)


def _unequal_work(best: pd.Series, second: pd.Series) -> tuple[float, float] | None:
    """The two cells' mean output tokens where they differ by more than OUTPUT_SPREAD_PCT of the
    longer (the rule unequal_work holds one run's answers to), else None."""
    lengths = (best.get("output_tokens"), second.get("output_tokens"))
    if any(length is None or pd.isna(length) for length in lengths):
        return None
    longer = max(lengths)
    if longer <= 0 or abs(lengths[0] - lengths[1]) <= OUTPUT_SPREAD_PCT / 100 * longer:
        return None
    return float(lengths[0]), float(lengths[1])


def _unequal_text(winner: Winner) -> str:
    lead, runner_up = winner.unequal_work or (np.nan, np.nan)
    return (f"unequal work: {winner.name}'s answers averaged {lead:,.1f} output tokens, "
            f"{winner.runner_up}'s {runner_up:,.1f} (more than {OUTPUT_SPREAD_PCT:g}% apart: they "
            "stopped at different places), so tok/s compares different work; --ignore-eos races "
            "equal lengths")


def _unranked(heat: pd.DataFrame, best: pd.Series, invalid: pd.DataFrame | None,
              failed: dict[str, str]) -> tuple[str, ...]:
    """Why each contender of a heat other than its one ranked cell (`best`) is not ranked."""
    why = [f"{cell['name']}'s run{'s' if cell['runs'] > 1 else ''} failed "
           f"{int(cell['failed'])}/{int(cell['requests'])} requests"
           for _, cell in heat[heat["failed"] != 0].iterrows()]
    named = {str(best["engine"]), *heat["engine"].astype(str)}
    if invalid is not None and not invalid.empty:
        bad = invalid[(invalid["workload_sha256"] == best["workload_sha256"])
                      & (invalid["users"] == best["users"])]
        ranked_config = tuple(str(best[c]) for c in CONFIG)
        for config, runs in bad.groupby(CONFIG, sort=True):
            if tuple(map(str, config)) == ranked_config:
                continue  # the ranked one's own invalid repeats: it is ranked by its valid ones
            first = runs.iloc[0]
            name = str(first["engine"]) if str(first["engine"]) not in named else config_label(first)
            reasons = sorted({reason for text in runs.get("verdict_reasons", pd.Series(dtype=str))
                              .fillna("").astype(str) for reason in text.split(";") if reason})
            was = "runs were" if len(runs) > 1 else "run was"
            why.append(f"{name}'s {was} {', '.join(reasons)} (invalid)" if reasons
                       else f"{name}'s {was} invalid")
            named.add(str(first["engine"]))
    why += [f"{engine} did not run" for engine in failed if engine not in named]
    return tuple(why)


def winner_line(winner: Winner, with_workload: bool = False) -> str:
    """One console line, e.g. "fastest at 32 users: vllm-cpu (4,210 tok/s), 1.80x llamacpp-cpu";
    `with_workload` names the heat's workload too (where a race holds several)."""
    users = f"{winner.users:g} user{'s' if winner.users != 1 else ''}"
    if with_workload:
        users += f" ({winner.workload})"
    lead = f"{winner.name} ({winner.tok_s:,.0f} tok/s)"
    single = " (single run)" if winner.single_run else ""
    if not winner.decided:
        why = "; ".join(winner.unranked)
        return (f"at {users}: undecided — {why}; only {winner.name} ranked" if why else
                f"at {users}: undecided — only {winner.name} ran (a winner needs two ranked)")
    if winner.unequal_work:
        return f"no winner at {users}: {lead} and {winner.runner_up} — {_unequal_text(winner)}"
    if not winner.significant:
        return (f"no clear winner at {users}: {lead} and {winner.runner_up} "
                f"({winner.runner_up_tok_s:,.0f} tok/s) differ by less than their repeats' "
                "spread (not significant)")
    doubts = f"; in doubt ({'; '.join(winner.doubts)}: see Warnings)" if winner.doubts else ""
    return f"fastest at {users}: {lead}, {winner.ratio:.2f}x {winner.runner_up}{single}{doubts}"


def race_markdown(cells: pd.DataFrame, failed: dict[str, str] | None = None) -> str:
    """The race table: one row per engine (configuration) per heat, fastest first within each
    heat, then a row for each engine that did not run (`failed`: engine -> why). A workload
    column is added when the cells hold more than one workload."""
    shown = shown_options(cells["flags"]) if "flags" in cells else {}
    leaders = winners(cells, failed=failed)
    columns: list[tuple[str, Callable[[pd.Series], str]]] = [
        ("platform", lambda r: str(r["engine"]) + (f" gpu {r['gpu']}" if r["gpu"] else "")),
        ("options", lambda r: options_cell(shown[r["flags"]])),
        ("users", lambda r: _number(r["users"], 0)),
    ]
    if not cells.empty and cells["workload_sha256"].nunique() > 1:
        columns.append(("workload", lambda r: str(r["workload"])))
    columns += [
        ("avg output tok/s", lambda r: _spread(r["tok_s_mean"], r["tok_s_sd"], 1)),
        ("avg completion time (s)", lambda r: _spread(r["time_s_mean"], r["time_s_sd"], 2)),
        ("avg output tokens", lambda r: _number(r.get("output_tokens"), 1)),
        ("TTFT p50 (ms)", lambda r: _number(r.get("ttft_p50_ms"), 1)),
        ("TTFT p99 (ms)", lambda r: _number(r.get("ttft_p99_ms"), 1)),
        ("ITL p50 (ms)", lambda r: _number(r.get("itl_p50_ms"), 2)),
        ("ITL p99 (ms)", lambda r: _number(r.get("itl_p99_ms"), 2)),
        ("repeats", lambda r: str(r["runs"])),
        ("failed", lambda r: f"{r['failed']}/{r['requests']}"),
        ("fastest", lambda r: _standing(r, leaders.get((r["workload_sha256"], r["users"])))),
    ]
    header = [name for name, _ in columns]
    body = []
    if not cells.empty:
        order = cells.sort_values(["users", "workload", "tok_s_mean"],
                                  ascending=[True, True, False])
        body = [[render(row) for _, render in columns] for _, row in order.iterrows()]
    for engine, why in (failed or {}).items():
        body.append([engine, *["-"] * (len(header) - 2), f"**did not run**: {why}"])
    return markdown_table(header, body)


def invalid_markdown(invalid: pd.DataFrame) -> str:
    """Invalid runs, one row each: the race's numbers for that run and the reasons it recorded."""
    shown = shown_options(invalid["flags"])

    def value(column: str, digits: int) -> Callable[[pd.Series], str]:
        return lambda r: _number(pd.to_numeric(r.get(column), errors="coerce"), digits)

    columns: list[tuple[str, Callable[[pd.Series], str]]] = [
        ("platform", lambda r: str(r["engine"]) + (f" gpu {r['gpu']}" if r["gpu"] else "")),
        ("options", lambda r: options_cell(shown[r["flags"]])),
        ("users", value("users", 0)),
    ]
    if invalid["workload_sha256"].nunique() > 1:
        columns.append(("workload", lambda r: str(r["workload"])))
    columns += [
        ("output tok/s", value("output_tok_per_s", 1)),
        ("completion time (s)", value("completion_time_s", 2)),
        ("avg output tokens", value("avg_output_tokens", 1)),
        ("TTFT p50 (ms)", value("ttft_p50_ms", 1)), ("TTFT p99 (ms)", value("ttft_p99_ms", 1)),
        ("ITL p50 (ms)", value("itl_p50_ms", 2)), ("ITL p99 (ms)", value("itl_p99_ms", 2)),
        ("failed", lambda r: f"{value('failed', 0)(r)}/{value('requests', 0)(r)}"),
        ("verdict reasons", lambda r: str(r.get("verdict_reasons") or "-").replace(";", ", ")),
        ("run", lambda r: f"`{r['run_id']}`"),
    ]
    order = invalid.sort_values(["users", "workload", "engine", "timestamp"])
    body = [[render(run) for _, render in columns] for _, run in order.iterrows()]
    return markdown_table([name for name, _ in columns], body)


def _standing(row: pd.Series, winner: Winner | None) -> str:
    if row["failed"]:
        return "not ranked: requests failed"
    if winner is None:
        return ""
    if row["name"] == winner.name:
        if not winner.decided:
            return "undecided: the only one ranked"
        if winner.unequal_work:
            return f"no winner: unequal work vs {winner.runner_up}"
        if not winner.significant:
            return f"not significant vs {winner.runner_up}"
        return f"**fastest**, {winner.ratio:.2f}x {winner.runner_up}" + (
            " (single run)" if winner.single_run else "")
    if winner.unequal_work and row["name"] == winner.runner_up:
        return f"no winner: unequal work vs {winner.name}"
    if not winner.significant and row["name"] == winner.runner_up:
        return f"not significant vs {winner.name}"
    return f"{winner.tok_s / row['tok_s_mean']:.2f}x slower than {winner.name}"

