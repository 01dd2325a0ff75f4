"""The rig's own figures for a run, exactly as loadtest/results/summary.py computes them (the
reference every peer definition is compared with)."""

from __future__ import annotations

from loadtest.reconcile.figures import METRICS, Figure
from loadtest.reconcile.run import Run
from loadtest.results.summary import summarize

__all__ = ["NAME", "SOURCE", "figures"]

NAME = "rig"
SOURCE = "loadtest/results/summary.py (this checkout)"


def figures(run: Run) -> dict[str, Figure]:
    summary = summarize(run.records)
    summary["duration_s"] = summary["completion_time_s"]
    return {key: Figure(summary.get(key)) for key, _ in METRICS}
