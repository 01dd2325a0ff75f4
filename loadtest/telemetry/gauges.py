"""The engine's request gauges held against what was in flight: gauges that read 0 at every
scrape while the rig had requests at the engine, or while the engine's own finished-request
counters rose, are not the engine's (Aphrodite 0.21.0 on an H200: running and waiting 0 in every
sample of a 128-user run while its TTFT count rose). The row then says so in
``telemetry_engine`` instead of ``sampled``, and drops the peaks read from them, so no check
(engine_shared) works from a 0 that was never the engine's.

``ENGINE_STATES`` is the closed list of ``telemetry_engine``'s values, each with what it means
and, for a failure, what to do.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any, Protocol

__all__ = ["ENGINE_STATES", "GAUGES_READ_ZERO", "GAUGE_COLUMNS", "gauges_read_zero", "request_spans"]

GAUGES_READ_ZERO = "gauges_read_zero"
ENGINE_STATES = {
    "sampled": "the engine's /metrics was read through the run",
    "absent": "the engine exports nothing the rig reads (its spec's metrics_none says why)",
    "not_sampled": "--telemetry-interval 0, or no engine URL to read",
    "failed": "the sampler could not start or stop; its telemetry.log says why",
    GAUGES_READ_ZERO: "its running and waiting gauges read 0 at every scrape while requests "
                      "were in flight (the run's warning engine_gauges_unread says what to do)",
}
# the columns read from the gauges: dropped from the row when the gauges read 0
GAUGE_COLUMNS = ("engine_running_peak", "engine_waiting_peak", "engine_held_peak")
# scrapes taken while requests were in flight, all reading 0, before the gauges are judged: one
# may fall while a request is in the API server only (before the scheduler has it, or after)
MIN_BUSY_SCRAPES = 3
_COUNTS = ("e2e_count", "ttft_count", "queue_time_count")


class _Timed(Protocol):
    sent_at: float
    sent_ns: int
    done_ns: int | None


def request_spans(records: Iterable[_Timed]) -> list[tuple[float, float]]:
    """Each finished request's (sent, done) in unix seconds, the clock the sampler stamps with."""
    return [(r.sent_at, r.sent_at + (r.done_ns - r.sent_ns) / 1e9)
            for r in records if r.done_ns is not None]


def gauges_read_zero(engine: Sequence[dict[str, Any]], spans: Sequence[tuple[float, float]]) -> bool:
    """True when ``engine``'s samples (source "engine", with "t") hold running gauges that read 0
    at every scrape of at least MIN_BUSY_SCRAPES taken while a span of ``spans`` was open, or
    across at least MIN_BUSY_SCRAPES scrape intervals in which the engine's own counters of
    finished requests rose."""
    read = sorted((s for s in engine if s.get("running") is not None), key=lambda s: s["t"])
    if not read or any(s["running"] or s.get("waiting") for s in read):
        return False
    starts, ends = sorted(a for a, _ in spans), sorted(b for _, b in spans)
    # in flight at t: sent before it, less those done by then
    busy = sum(1 for s in read if bisect_left(starts, s["t"]) > bisect_right(ends, s["t"]))
    rising = sum(1 for a, b in pairwise(read) if _finished(b) > _finished(a))
    return max(busy, rising) >= MIN_BUSY_SCRAPES


def _finished(sample: dict[str, Any]) -> float:
    return next((sample[c] for c in _COUNTS if sample.get(c) is not None), 0.0)
