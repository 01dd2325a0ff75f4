"""This machine's calibrated limit, and the run-side measure to hold against it.

    faithful_event_rate(path=None, processes=None) -> float | None
        streamed events per second per client process that this machine's client measured
        faithfully (TTFT and ITL error within 1 ms p50 / 2 ms p99) when calibrated
        (scripts/calibrate.sh); None when this machine has no calibration file.
    events_per_s(row) -> float | None
        what a run asked of each client process: output chunks / completion time / processes
        (defined in loadtest/results/events.py, which the verdict reads without importing this).

A run whose events_per_s is above faithful_event_rate was measured past what this client was
shown to time within a millisecond or two.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loadtest.toolkit.repo import REPO
from loadtest.results.events import events_per_s  # re-exported: results owns it, never imports us

__all__ = ["faithful_event_rate", "events_per_s", "calibration_path", "faithful_limits",
           "headline_limit"]

DEFAULT_DIR = REPO / "results" / "calibration"


def calibration_path(directory: Path | None = None, host: str | None = None,
                     ncpu: int | None = None) -> Path:
    """DIR/<hostname>-<ncpu>cpu.json (default DIR: the checkout's results/calibration)."""
    if ncpu is None:
        ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return Path(directory or DEFAULT_DIR) / f"{host or socket.gethostname()}-{ncpu}cpu.json"


def faithful_event_rate(path: Path | str | None = None, processes: int | None = None) -> float | None:
    """Events/s per client process measured faithfully here. Without `processes`: the file's
    headline (the lowest limit among process counts that fit the client's cores, so it holds for
    any of them); with it: the limit at the largest calibrated count <= processes (else the
    smallest calibrated). 0.0 when the calibration found no faithful load; None without a file
    (or an unreadable one)."""
    file = Path(path) if path is not None else calibration_path()
    try:
        data = json.loads(file.read_text())
        limits = {int(k): float(v) for k, v in data["faithful_events_per_s_per_process"].items()
                  if v is not None}
        headline = data.get("faithful_events_per_s")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if processes is None or not limits:
        return None if headline is None else float(headline)
    below = [count for count in limits if count <= processes]
    return limits[max(below) if below else min(limits)]


def faithful_limits(rows: list[Mapping[str, Any]], by: str = "processes",
                    in_all: bool = False) -> dict[str, float]:
    """Per process count (or another column, `by`; as a string key): the highest events/s per
    process (`in_all`: times its processes) among its settings judged faithful ("yes"); 0.0
    when none was."""
    limits: dict[str, float] = {}
    for row in rows:
        key = str(row[by])
        rate = (row.get("events_per_s_per_process") or 0.0) * (row["processes"] if in_all else 1)
        best = limits.get(key, 0.0)
        limits[key] = max(best, rate) if row.get("faithful") == "yes" else best
    return limits


def headline_limit(limits: Mapping[str, float], client_cores: int) -> float | None:
    """The lowest limit among process counts that fit the client's cores (all, if none fit)."""
    fitting = [v for k, v in limits.items() if int(k) <= max(client_cores, 1)]
    values = fitting or list(limits.values())
    return min(values) if values else None

