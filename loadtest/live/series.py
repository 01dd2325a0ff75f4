"""What the web UI charts while a run goes on: the run's figures over time, from its records as
they arrive, and the latest GPU and engine samples, from its telemetry.jsonl as the sampler
writes it. Each read looks only at what is new since the last one.

    timeline = Timeline(); timeline.update(run.records); timeline.points(now_ns)
    -> [{"t_s": 0, "width_s": 1, "output_tok_per_s": ..., "ttft_p50_ms": ..., "itl_p50_ms": ...,
         "failed": 1, "failed_by_kind": {"timeout": 1}, "settled": True}, ...]

Output tokens are counted in the second their chunk arrived (each chunk's time is its request's
first chunk plus its gaps, the stamps the streaming read already took: nothing more is done per
chunk while measuring), each chunk carrying an equal share of its request's output tokens. A
request is read once it has ended, so the last seconds may still grow: a point is `settled` once
it ended longer ago than the longest request so far took, plus the second a worker's records
may wait (the page draws the others dashed). Counted when their requests ended instead, tokens
of users that finish together drew a saw-tooth over a steady run (issue 53).
    tail = TelemetryTail(run_dir / "telemetry.jsonl"); tail.latest()
    -> {"gpus": [{"gpu": 0, "util_pct": 71, "mem_used_mib": ...}], "engine": {"running": ...}}
    tail.points()  # from its first sample
    -> [{"t_s": 0, "width_s": 1, "gpu_util_pct": 71.0, "running": 12.0, "waiting": 0.0}, ...]
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import Any

import numpy as np

from loadtest.results.record import RequestRecord

__all__ = ["MAX_POINTS", "TelemetryTail", "Timeline"]

MAX_POINTS = 120  # a chart's points: one a second up to two minutes, then wider intervals


# A worker sends its records once a second (loadtest/client/dispatch.py's _RECORD_BATCH_S; not
# imported: that module brings Locust, which patches the standard library, into every reader).
_RECORDS_WAIT_NS = 1_000_000_000


def intervals(span_s: int) -> tuple[int, range]:
    """The width of a chart's intervals over `span_s` whole seconds (at most MAX_POINTS of them),
    and their starts."""
    width = max(1, math.ceil(span_s / MAX_POINTS))
    return width, range(0, span_s, width)


# A second's chunk gaps are counted in log-spaced bins from 0.01 ms to 100 s, each 8.4% wide: a
# chart's ITL p50 is the middle gap's bin (within 4.2% of that gap), at a fixed cost a second
# however many tokens streamed.
_GAP_EDGES_MS = np.geomspace(0.01, 100_000.0, 201)


def _median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def _gap_counts(gaps_ms: np.ndarray) -> np.ndarray:
    return np.bincount(np.searchsorted(_GAP_EDGES_MS, gaps_ms), minlength=len(_GAP_EDGES_MS) + 1)


def _binned_median(counts: np.ndarray) -> float | None:
    """The middle of the bin holding the median gap (the geometric middle; the edges past the
    first and last bins are those bins' own edges)."""
    n = int(counts.sum())
    if not n:
        return None
    i = int(np.searchsorted(np.cumsum(counts), (n + 1) / 2))
    low, high = _GAP_EDGES_MS[max(i - 1, 0)], _GAP_EDGES_MS[min(i, len(_GAP_EDGES_MS) - 1)]
    return float(math.sqrt(low * high))


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


@dataclass
class Timeline:
    """Per second of the run (from its first send): the output tokens that arrived in it, the gaps
    between chunks of the requests that ended in it, the TTFTs of those sent in it, the failures
    that ended in it by kind; read as at most MAX_POINTS intervals of whole seconds."""
    _seen: int = 0
    _origin_ns: int | None = None
    _tokens: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    _ttfts: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    _gaps: dict[int, np.ndarray] = field(default_factory=dict)  # counts in _GAP_EDGES_MS bins
    _failed: dict[int, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    _longest_ns: int = 0  # the longest request so far, sent to done

    def update(self, records: Sequence[RequestRecord]) -> None:
        new = records[self._seen:]
        self._seen = len(records)
        if not new:
            return
        if self._origin_ns is None:
            self._origin_ns = min(r.sent_ns for r in new)
        for r in new:
            end = self._second(r.done_ns or r.sent_ns)
            if r.error_kind is not None:
                self._failed[end][r.error_kind] += 1
                continue
            self._add_tokens(r, end)
            if r.done_ns is not None:
                self._longest_ns = max(self._longest_ns, r.done_ns - r.sent_ns)
            if r.chunk_gaps_ns:
                counts = _gap_counts(np.asarray(r.chunk_gaps_ns) / 1e6)
                self._gaps[end] = self._gaps[end] + counts if end in self._gaps else counts
            if r.ttft_ms is not None:
                self._ttfts[self._second(r.sent_ns)].append(r.ttft_ms)

    def _add_tokens(self, r: RequestRecord, end: int) -> None:
        """The record's output tokens, shared equally among its chunks, in their seconds (all in
        its last second where it has no chunk stamps)."""
        if not r.output_tokens:
            return
        if r.first_chunk_ns is None:
            self._tokens[end] += r.output_tokens
            return
        arrived = np.cumsum([r.first_chunk_ns - self._origin_ns, *r.chunk_gaps_ns])
        first = self._second(r.first_chunk_ns)
        per_second = np.bincount(np.maximum(arrived // 1_000_000_000 - first, 0))
        share = r.output_tokens / len(arrived)
        for offset in np.flatnonzero(per_second):
            self._tokens[first + int(offset)] += float(per_second[offset]) * share

    def points(self, now_ns: int | None = None) -> list[dict[str, Any]]:
        """The intervals so far; with `now_ns` (the records' clock) those whose tokens may still
        grow are not `settled` (None: a run that has ended, all settled)."""
        seconds = [*self._tokens, *self._ttfts, *self._failed]
        if not seconds:
            return []
        width, starts = intervals(max(seconds) + 1)
        open_from = (math.inf if now_ns is None or self._origin_ns is None else
                     (now_ns - self._longest_ns - _RECORDS_WAIT_NS - self._origin_ns) / 1e9)
        out = []
        for start in starts:
            window = range(start, start + width)
            failed = sum((self._failed.get(s, Counter()) for s in window), Counter())
            out.append({"t_s": start, "width_s": width,
                        "output_tok_per_s": sum(self._tokens.get(s, 0) for s in window) / width,
                        "ttft_p50_ms": _median([t for s in window for t in self._ttfts.get(s, ())]),
                        "itl_p50_ms": _binned_median(sum((self._gaps[s] for s in window
                                                          if s in self._gaps), np.zeros(1, np.int64))),
                        "failed": failed.total(), "failed_by_kind": dict(failed),
                        "settled": start + width <= open_from})
        return out

    def _second(self, ns: int) -> int:
        assert self._origin_ns is not None
        return max(0, (ns - self._origin_ns) // 1_000_000_000)


class TelemetryTail:
    """The latest sample of each GPU and of the engine in a run's telemetry.jsonl, and per second
    from its first sample: the GPUs' mean busy %, the engine's running and waiting requests."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._gpus: dict[int, dict[str, Any]] = {}
        self._engine: dict[str, Any] | None = None
        self._origin_s: float | None = None
        self._per_second: dict[str, dict[int, list[float]]] = {
            key: defaultdict(list) for key in ("gpu_util_pct", "running", "waiting")}

    def latest(self) -> dict[str, Any] | None:
        """{"gpus": [...], "engine": {...} or None}, or None where nothing was sampled."""
        self._read_new()
        if not self._gpus and self._engine is None:
            return None
        return {"gpus": [self._gpus[i] for i in sorted(self._gpus)], "engine": self._engine}

    def points(self) -> list[dict[str, Any]]:
        """The samples so far as at most MAX_POINTS intervals (means over each); [] if none."""
        self._read_new()
        seconds = [second for series in self._per_second.values() for second in series]
        if not seconds:
            return []
        width, starts = intervals(max(seconds) + 1)
        return [{"t_s": start, "width_s": width,
                 **{key: _mean([v for s in range(start, start + width) for v in series.get(s, ())])
                    for key, series in self._per_second.items()}} for start in starts]

    def _read_new(self) -> None:
        try:
            with self.path.open("rb") as file:
                file.seek(self._offset)
                chunk = file.read()
        except OSError:
            return
        complete = chunk[:chunk.rfind(b"\n") + 1]  # a line still being written waits
        self._offset += len(complete)
        for line in complete.splitlines():
            try:
                sample = json.loads(line)
            except ValueError:
                continue
            if sample.get("source") == "gpu" and isinstance(sample.get("gpu"), int):
                self._gpus[sample["gpu"]] = {k: sample.get(k) for k in
                                             ("gpu", "util_pct", "mem_used_mib", "mem_total_mib",
                                              "power_w")}
                self._add(sample, "gpu_util_pct", sample.get("util_pct"))
            elif sample.get("source") == "engine":
                self._engine = {k: sample.get(k) for k in ("running", "waiting", "kv_cache_pct")}
                self._add(sample, "running", sample.get("running"))
                self._add(sample, "waiting", sample.get("waiting"))

    def _add(self, sample: dict[str, Any], key: str, value: Any) -> None:
        t = sample.get("t")
        if not isinstance(t, (int, float)) or not isinstance(value, (int, float)):
            return
        if self._origin_s is None:
            self._origin_s = t
        self._per_second[key][max(0, int(t - self._origin_s))].append(float(value))
