"""The report's section on time-bounded runs (--duration, --stages): per run, its timeslices
plotted over the run (throughput, TTFT and ITL percentiles per interval, the measurement window
shaded, stage edges marked), so warm-up and drift are visible, and a staged run's table of
stages, so a reader sees at which load latency breaks. Read from each run's run.json
(loadtest/client/timing.py writes it); runs without one are passed over."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

import matplotlib

matplotlib.use("Agg")  # files only, as loadtest/report/plots.py

import matplotlib.pyplot as plt
import pandas as pd

from loadtest.report.runset import run_files
from loadtest.report.tables import markdown_table

__all__ = ["plot_timeslices", "stages_markdown", "timed_runs_section"]

_DPI = 110


class _Report(Protocol):
    out: Path

    def heading(self, level: int, text: str) -> None: ...
    def text(self, text: str) -> None: ...
    def table(self, markdown: str) -> None: ...
    def image(self, path: Path, alt: str) -> None: ...


def timed_runs_section(report: _Report, runs: pd.DataFrame) -> None:
    """One plot per time-bounded run, and a table of its stages where it had them."""
    if "duration_s" not in runs or not runs["duration_s"].notna().any():
        return
    report.heading(2, "Time-bounded runs: timeslices")
    report.text("Each interval's figures from the run's raw records: requests count in the "
                "interval they were sent in (TTFT, ITL), tokens where their chunks arrived, "
                "completions where they ended. The shaded span is the measurement window "
                "(after --warmup-s, before --cooldown-s) that the row's window_* columns "
                "describe; dotted lines are stage edges.")
    for _, run in runs[runs["duration_s"].notna()].iterrows():
        saved = _run_json(run)
        if not saved or not saved.get("timeslices"):
            report.text(f"`{run['run_id']}`: no run.json with timeslices found.")
            continue
        path = report.out / "timeslices" / f"{run['run_id']}.png"
        plot_timeslices(f"{run['engine']}, {_load(run)} ({run['run_id']})", saved, path)
        report.image(path, f"timeslices of {run['run_id']}")
        if saved.get("stages"):
            report.table(stages_markdown(saved["stages"]))


def _load(run: pd.Series) -> str:
    if isinstance(run.get("stages_file"), str) and run["stages_file"]:
        return f"stages {Path(run['stages_file']).name}"
    return f"{run['users']:g} users, {run['duration_s']:g} s"


def _run_json(run: pd.Series) -> dict[str, Any] | None:
    folder = run_files(run)
    if folder is None or not (folder / "run.json").exists():
        return None
    try:
        return json.loads((folder / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def stages_markdown(stages: list[dict[str, Any]]) -> str:
    """One line per stage: its load, its span and its figures."""
    header = ["stage", "load", "from-to (s)", "sent", "failed", "tok/s", "req/s", "TTFT p50 (ms)",
              "TTFT p99 (ms)", "ITL p99 (ms)", "e2e p99 (ms)"]
    body = [[str(s["stage"]),
             f"{s['rate']:g} req/s" if s.get("rate") else f"{s['users']} users"
             + (f" (+{s['spawn_rate']:g}/s)" if s.get("spawn_rate") else ""),
             f"{s['start_s']:g}-{s['end_s']:g}", str(s["sent"]), str(s["failed"]),
             _number(s["output_tok_per_s"], 1), _number(s["req_per_s"], 2),
             _number(s["ttft_p50_ms"], 1), _number(s["ttft_p99_ms"], 1),
             _number(s["itl_p99_ms"], 1), _number(s["e2e_p99_ms"], 1)] for s in stages]
    return markdown_table(header, body)


def _number(value: Any, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def plot_timeslices(title: str, saved: dict[str, Any], path: Path) -> None:
    """Throughput (top) and latency percentiles (bottom) per timeslice, at each slice's middle
    (a last slice shorter than half the others is left out)."""
    slices = pd.DataFrame(saved["timeslices"])
    length = slices["end_s"] - slices["start_s"]
    # a run's last slice may be a sliver of drain whose rates are noise: in run.json, not drawn
    if len(slices) > 1 and length.iloc[-1] < 0.5 * length.max():
        slices = slices.iloc[:-1]
    middle = (slices["start_s"] + slices["end_s"]) / 2
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    top.plot(middle, slices["output_tok_per_s"], marker=".", label="output tok/s")
    top.set_ylabel("output tok/s")
    rate = top.twinx()
    rate.plot(middle, slices["req_per_s"], color="tab:gray", linestyle="--", label="req/s done")
    rate.set_ylabel("req/s done")
    for column, label in (("ttft_p50_ms", "TTFT p50"), ("ttft_p99_ms", "TTFT p99"),
                          ("itl_p99_ms", "ITL p99")):
        bottom.plot(middle, pd.to_numeric(slices[column]), marker=".", label=label)
    bottom.set_ylabel("ms (requests sent in the slice)")
    bottom.set_xlabel(f"seconds from the run's start ({saved.get('timeslice_s', 0):g} s slices)")
    bottom.legend(loc="upper left", fontsize="small")
    for axis in (top, bottom):
        if saved.get("window_s") is not None:
            axis.axvspan(saved["window_start_s"], saved["window_end_s"], color="tab:green",
                         alpha=0.08)
        for stage in saved.get("stages", [])[1:]:
            axis.axvline(stage["start_s"], color="black", linestyle=":", linewidth=0.8)
        axis.grid(alpha=0.3)
    top.set_title(title, fontsize="medium")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)
