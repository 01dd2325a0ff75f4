"""events_per_s(row): the load a run put on each client process, in streamed events per second.

The one measure a run's verdict and the calibration share: calibration (loadtest/calibration/)
finds the highest events/s per process this machine's client times faithfully, and a run above
it is marked `client_past_calibrated_rate` (loadtest/results/rules.py). It lives here, in results,
so that results never imports calibration: calibration imports it from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["events_per_s", "number"]


def events_per_s(row: Mapping[str, Any]) -> float | None:
    """Output chunks streamed per second per client process, from a run row (runs.csv strings
    or run.json numbers): output_chunks (output_tokens when the row has no chunk count) /
    completion_time_s / processes (1 when absent). None when the row cannot say."""
    chunks = number(row.get("output_chunks"))
    if chunks is None:
        chunks = number(row.get("output_tokens"))
    seconds = number(row.get("completion_time_s"))
    processes = number(row.get("processes")) or 1
    if chunks is None or not seconds:
        return None
    return chunks / seconds / max(processes, 1)


def number(value: Any) -> float | None:
    """A cell (text or number) as a float; None when empty or not a number."""
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
