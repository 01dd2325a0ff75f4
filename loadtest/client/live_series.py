"""What the web UI charts while a run goes on: the run's figures over time, from its records as
they arrive, and the latest GPU and engine samples, from its telemetry.jsonl as the sampler
writes it. Each read looks only at what is new since the last one.

    timeline = Timeline(); timeline.update(run.records); timeline.points()
    -> [{"t_s": 0, "width_s": 1, "output_tok_per_s": ..., "ttft_p50_ms": ..., "failed": 0}, ...]
    TelemetryTail(run_dir / "telemetry.jsonl").latest()
    -> {"gpus": [{"gpu": 0, "util_pct": 71, "mem_used_mib": ...}], "engine": {"running": ...}}
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import Any

import numpy as np

from loadtest.results.record import RequestRecord

__all__ = ["MAX_POINTS", "TelemetryTail", "Timeline"]

MAX_POINTS = 120  # a chart's points: one a second up to two minutes, then wider intervals


@dataclass
class Timeline:
    """Per second of the run (from its first send): output tokens of the requests that ended in
    it, the TTFTs of those sent in it, the failures that ended in it; read as at most MAX_POINTS
    intervals of whole seconds."""
    _seen: int = 0
    _origin_ns: int | None = None
    _tokens: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    _ttfts: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    _failed: dict[int, int] = field(default_factory=lambda: defaultdict(int))

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
                self._failed[end] += 1
                continue
            self._tokens[end] += r.output_tokens or 0
            if r.ttft_ms is not None:
                self._ttfts[self._second(r.sent_ns)].append(r.ttft_ms)

    def points(self) -> list[dict[str, Any]]:
        seconds = [*self._tokens, *self._ttfts, *self._failed]
        if not seconds:
            return []
        span = max(seconds) + 1
        width = max(1, math.ceil(span / MAX_POINTS))
        out = []
        for start in range(0, span, width):
            window = range(start, start + width)
            ttfts = [t for s in window for t in self._ttfts.get(s, ())]
            out.append({"t_s": start, "width_s": width,
                        "output_tok_per_s": sum(self._tokens.get(s, 0) for s in window) / width,
                        "ttft_p50_ms": float(np.median(ttfts)) if ttfts else None,
                        "failed": sum(self._failed.get(s, 0) for s in window)})
        return out

    def _second(self, ns: int) -> int:
        assert self._origin_ns is not None
        return max(0, (ns - self._origin_ns) // 1_000_000_000)


class TelemetryTail:
    """The latest sample of each GPU and of the engine in a run's telemetry.jsonl."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._gpus: dict[int, dict[str, Any]] = {}
        self._engine: dict[str, Any] | None = None

    def latest(self) -> dict[str, Any] | None:
        """{"gpus": [...], "engine": {...} or None}, or None where nothing was sampled."""
        self._read_new()
        if not self._gpus and self._engine is None:
            return None
        return {"gpus": [self._gpus[i] for i in sorted(self._gpus)], "engine": self._engine}

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
            elif sample.get("source") == "engine":
                self._engine = {k: sample.get(k) for k in ("running", "waiting", "kv_cache_pct")}
