"""The report's open-loop, goodput and output-equivalence sections, from runs.csv rows only
(and, for equivalence, each run's outputs.jsonl).

Open loop (rows with a `rate`): per configuration and --users cap, one line per offered rate
with what was achieved, latency from the schedule and from the send, how late sends were, and
goodput. Rules, printed with the table:
- offered: --rate, with the schedule's own rate beside it (a Poisson schedule of N requests is
  not exactly --rate); achieved: the row's req_per_s (completed / completion time, the basis of
  goodput too);
- knee: the smallest offered rate whose achieved req/s is within KNEE_PCT of the best achieved
  (the thread sweep's rule, on rates): past it, offering more does not get more done;
- saturated: answers finished (`done_rate_per_s`, first to last answer: no ramp-up in it) below
  SATURATED_PCT of the schedule's own rate, or sends behind their schedule;
- SLO rate: the highest offered rate at which at least --slo-share percent (default 99) of the
  requests met every target, and every rate below it did too, among the rates the engine kept
  up with (a saturated run was not offered its rate: its sends lagged, or its answers did).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from loadtest.report.runset import CONFIG, run_files
from loadtest.results.equivalence import EquivalenceError, compare_outputs, read_outputs

__all__ = ["KNEE_PCT", "SATURATED_PCT", "equivalence_table", "is_open_loop", "knee_rate",
           "open_loop_markdown", "plot_goodput", "rate_table", "saturated", "slo_rate"]

KNEE_PCT = 5.0
SATURATED_PCT = 90.0


def is_open_loop(runs: pd.DataFrame) -> pd.Series:
    rate = pd.to_numeric(runs["rate"], errors="coerce") if "rate" in runs else None
    return rate.notna() if rate is not None else pd.Series(False, index=runs.index)


def _num(row: Any, column: str) -> float:
    value = pd.to_numeric(pd.Series([row.get(column)]), errors="coerce").iloc[0]
    return float(value) if pd.notna(value) else float("nan")


def rate_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Open-loop runs -> one line per (configuration, users, offered rate), repeats averaged."""
    runs = runs[is_open_loop(runs)]
    if runs.empty:
        return pd.DataFrame()
    lines = []
    for key, rows in runs.groupby([*CONFIG, "users", "rate"], sort=True, dropna=False):
        mean = {c: float(pd.to_numeric(rows[c], errors="coerce").mean()) if c in rows else float("nan")
                for c in ("req_per_s", "done_rate_per_s", "scheduled_rate_per_s", "output_tok_per_s", "ttft_sched_p50_ms", "ttft_sched_p99_ms",
                          "ttft_p50_ms", "ttft_p99_ms", "e2e_sched_p99_ms", "send_lag_p99_ms",
                          "capped_requests", "slo_met_pct", "goodput_req_per_s",
                          "goodput_tok_per_s")}
        verdicts = sorted(set(_texts(rows, "verdict")) - {""})
        reasons = sorted({r for text in _texts(rows, "verdict_reasons") for r in text.split(";") if r})
        lines.append({**dict(zip([*CONFIG, "users", "rate"], key)), "runs": len(rows),
                      "arrival": ",".join(sorted(set(_texts(rows, "arrival")))),
                      "slo": ",".join(sorted(set(_texts(rows, "slo")) - {""})),
                      **mean, "verdict": "/".join(verdicts), "reasons": ";".join(reasons)})
    return pd.DataFrame(lines)


def _texts(rows: pd.DataFrame, column: str) -> list[str]:
    """A column's cells as text, "" for empty ones (runs.csv reads an all-empty column as NaN)."""
    if column not in rows:
        return [""] * len(rows)
    return ["" if pd.isna(v) else str(v) for v in rows[column]]


def knee_rate(config: pd.DataFrame) -> float | None:
    """The smallest offered rate achieving within KNEE_PCT of the best achieved req/s."""
    achieved = config["req_per_s"]
    if achieved.isna().all():
        return None
    best = achieved.max()
    return float(config.loc[achieved >= best * (1 - KNEE_PCT / 100), "rate"].min())


def slo_rate(config: pd.DataFrame, share_pct: float) -> float | None:
    """The highest offered rate up to which every rate met the SLO for share_pct of requests
    and was not saturated."""
    best = None
    for _, line in config.sort_values("rate").iterrows():
        met = line["slo_met_pct"]
        if pd.isna(met) or met < share_pct or saturated(line):
            break
        best = float(line["rate"])
    return best


def open_loop_markdown(table: pd.DataFrame, share_pct: float) -> tuple[str, list[str]]:
    """The open-loop table and one summary line per configuration (knee, SLO rate)."""
    header = ["engine / flags", "users cap", "offered req/s (schedule's own)", "achieved req/s",
              "output tok/s",
              "TTFT p50 / p99 from schedule (ms)", "TTFT p50 / p99 from send (ms)",
              "send lag p99 (ms)", "cap full", "SLO met", "goodput req/s", "goodput tok/s", "notes"]
    body, lines = [], []
    for _, config in table.groupby([*CONFIG, "users"], sort=True, dropna=False):
        config = config.sort_values("rate")
        knee = knee_rate(config)
        name = f"{config.iloc[0]['engine']} {config.iloc[0]['flags'] or '(defaults)'}".strip()
        has_slo = config["slo"].astype(bool).any()
        best = slo_rate(config, share_pct) if has_slo else None
        for _, line in config.iterrows():
            notes = []
            if knee is not None and line["rate"] == knee:
                notes.append("knee")
            if saturated(line):
                notes.append("saturated")
            if has_slo and best is not None and line["rate"] == best:
                notes.append(f"highest rate with >= {share_pct:g}% in SLO")
            if line["verdict"] and line["verdict"] != "valid":
                notes.append(f"{line['verdict']}: {line['reasons']}")
            body.append([name, _f(line['users'], 0),
                         f"{line['rate']:g} {line['arrival']} ({_f(line['scheduled_rate_per_s'], 2)})",
                         _f(line["req_per_s"], 2), _f(line["output_tok_per_s"], 1),
                         f"{_f(line['ttft_sched_p50_ms'], 1)} / {_f(line['ttft_sched_p99_ms'], 1)}",
                         f"{_f(line['ttft_p50_ms'], 1)} / {_f(line['ttft_p99_ms'], 1)}",
                         _f(line["send_lag_p99_ms"], 1), _f(line["capped_requests"], 0),
                         "-" if pd.isna(line["slo_met_pct"]) else f"{line['slo_met_pct']:.1f}%",
                         _f(line["goodput_req_per_s"], 2), _f(line["goodput_tok_per_s"], 1),
                         ", ".join(notes)])
        summary = f"{name}, users cap {_f(config.iloc[0]['users'], 0)}: knee at " + \
            (f"{knee:g} req/s offered" if knee is not None else "-")
        if has_slo:
            summary += (f"; highest rate with >= {share_pct:g}% of requests meeting "
                        f"{config.iloc[0]['slo']}: " + (f"{best:g} req/s" if best is not None
                                                        else "none of the rates run"))
        lines.append(summary)
    return _markdown(header, body), lines


def saturated(line: Any) -> bool:
    """The engine did not keep up: answers finished below SATURATED_PCT of the schedule's own
    rate, or the sends themselves fell behind it (the verdict's behind_schedule)."""
    done, scheduled = _num(line, "done_rate_per_s"), _num(line, "scheduled_rate_per_s")
    slow = not np.isnan(done) and not np.isnan(scheduled) and done < scheduled * SATURATED_PCT / 100
    return slow or "behind_schedule" in str(line.get("reasons", line.get("verdict_reasons", "")))


def plot_goodput(runs: pd.DataFrame, table: pd.DataFrame, path: Path) -> bool:
    """Goodput (req/s) against offered rate (open loop) and against users (closed loop with
    --slo); achieved req/s dashed beside it. False when there is nothing to draw."""
    closed = runs[~is_open_loop(runs)]
    closed = closed.loc[pd.Series([t != "" for t in _texts(closed, "slo")], index=closed.index,
                                  dtype=bool)]
    if table.empty and closed.empty:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for index, (_, config) in enumerate(table.groupby([*CONFIG, "users"], sort=True, dropna=False)
                                        if not table.empty else []):
        config = config.sort_values("rate")
        label = f"{config.iloc[0]['engine']} {config.iloc[0]['flags'] or ''} cap {int(config.iloc[0]['users'])}"
        colour = f"C{index % 10}"
        left.plot(config["rate"], config["goodput_req_per_s"], marker="o", color=colour,
                  label=f"{label}: goodput")
        left.plot(config["rate"], config["req_per_s"], ls="--", marker=".", color=colour,
                  label=f"{label}: achieved")
    if not table.empty:
        top = float(np.nanmax(table["rate"]))
        left.plot([0, top], [0, top], color="grey", lw=0.8, label="offered")
    left.set_xlabel("offered rate (req/s)")
    left.set_ylabel("req/s")
    left.set_title("goodput against offered rate", fontsize=9)
    for index, (_, config) in enumerate(closed.groupby(CONFIG, sort=True, dropna=False)):
        means = config.groupby("users")[["goodput_req_per_s", "req_per_s"]].mean().sort_index()
        colour = f"C{index % 10}"
        right.plot(means.index, means["goodput_req_per_s"], marker="o", color=colour,
                   label=f"{config.iloc[0]['engine']} {config.iloc[0]['flags'] or ''}: goodput")
        right.plot(means.index, means["req_per_s"], ls="--", marker=".", color=colour,
                   label="achieved")
    if closed.empty:
        right.text(0.5, 0.5, "no closed-loop runs with --slo", ha="center", va="center",
                   transform=right.transAxes, color="grey")
    if table.empty:
        left.text(0.5, 0.5, "no open-loop runs", ha="center", va="center",
                  transform=left.transAxes, color="grey")
    right.set_xlabel("users (closed loop)")
    right.set_title("goodput against users", fontsize=9)
    for axis in (left, right):
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def equivalence_table(runs: pd.DataFrame, baseline: str | None) -> tuple[str, str]:
    """Each configuration's kept outputs against the baseline configuration's (flags ==
    `baseline`, else the first run that kept outputs), same prompt set: exact-match rate, first
    differing token, and its output tok/s beside the baseline's. ("", "") without outputs."""
    kept = []
    for _, run in runs.iterrows():
        folder = run_files(run)
        if folder is not None and (folder / "outputs.jsonl").is_file():
            kept.append((run, folder))
    if len(kept) < 2:
        return "", ""
    base = next(((r, f) for r, f in kept if baseline is not None and str(r["flags"]) == baseline),
                kept[0])
    base_run, base_dir = base
    base_outputs = read_outputs(base_dir)
    body = []
    for run, folder in kept:
        if run["run_id"] == base_run["run_id"]:
            continue
        if str(run.get("prompts_sha256", "")) != str(base_run.get("prompts_sha256", "")):
            continue
        try:
            result = compare_outputs(base_outputs, read_outputs(folder))
        except EquivalenceError:
            continue
        same_load = all(str(run.get(c, "")) == str(base_run.get(c, "")) for c in ("users", "rate"))
        speed = (_mean_tok_s(runs, run) / _mean_tok_s(runs, base_run) if same_load
                 else float("nan"))
        greedy = _num(run, "temperature") == 0 and _num(base_run, "temperature") == 0
        first = ("-" if result["first_diff_p50"] is None else
                 f"{result['first_diff_p50']:g} / {result['first_diff_min']} ({result['unit']})")
        body.append([f"{run['engine']} {run['flags'] or '(defaults)'}",
                     f"{_users_or_rate(run)}", f"{result['exact_match']}/{result['compared']}",
                     "-" if result["exact_match_pct"] is None else f"{result['exact_match_pct']:.1f}%",
                     first, ("-" if same_load else "- (other load)") if np.isnan(speed)
                     else f"{speed:.2f}x",
                     "" if greedy else "not greedy"])
    if not body:
        return "", ""
    title = (f"Baseline: {base_run['engine']} {base_run['flags'] or '(defaults)'} "
             f"({_users_or_rate(base_run)}, run {base_run['run_id']}).")
    header = ["configuration", "load", "identical answers", "exact match",
              "first differing position, median / earliest",
              "output tok/s vs baseline (configuration means at this load)", "notes"]
    return title, _markdown(header, body)


def _mean_tok_s(runs: pd.DataFrame, run: pd.Series) -> float:
    """Mean output tok/s of `run`'s configuration at its load, over its repeats (valid or not)."""
    same = runs
    for column in (*CONFIG, "users", "rate", "prompts_sha256", "max_tokens"):
        if column in runs:
            same = same[same[column].astype(str) == str(run.get(column, ""))]
    values = pd.to_numeric(same["output_tok_per_s"], errors="coerce") if not same.empty else None
    return float(values.mean()) if values is not None else _num(run, "output_tok_per_s")


def _users_or_rate(run: pd.Series) -> str:
    rate = _num(run, "rate")
    users = int(_num(run, "users")) if not np.isnan(_num(run, "users")) else "?"
    return f"{rate:g} req/s, cap {users}" if not np.isnan(rate) else f"{users} users"


def _f(value: Any, digits: int) -> str:
    return "-" if value is None or pd.isna(value) else f"{value:,.{digits}f}"


def _markdown(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)
