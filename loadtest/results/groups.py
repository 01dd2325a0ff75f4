"""Figures per group of a run's requests (per LoRA adapter, per kind of agent): how many, how
many failed, output tokens and tok/s over the run's completion time (the groups' rates add up
to the run's), TTFT p50/p99 from the actual send, and from the schedule where the run had one
(open loop, traces): the latency a user of that group waited."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from loadtest.results.record import RequestRecord

__all__ = ["group_figures"]


def _pct(values: list[float], q: float) -> float | None:
    import numpy as np  # here, not above: the run's options register without numpy
    return float(np.percentile(values, q)) if values else None


def group_figures(records: Sequence[RequestRecord], group_of: Callable[[RequestRecord], str],
                  completion_time_s: float | None) -> dict[str, dict[str, Any]]:
    """Each group's figures, in the order groups first appear."""
    groups: dict[str, list[RequestRecord]] = {}
    for record in records:
        groups.setdefault(group_of(record), []).append(record)
    figures = {}
    for name, group in groups.items():
        done = [r for r in group if r.ok]
        ttfts = [r.ttft_ms for r in done if r.ttft_ms is not None]
        tokens = sum(r.output_tokens or 0 for r in done)
        figures[name] = {
            "requests": len(group), "failed": len(group) - len(done), "output_tokens": tokens,
            "output_tok_per_s": tokens / completion_time_s if completion_time_s else None,
            "ttft_p50_ms": _pct(ttfts, 50), "ttft_p99_ms": _pct(ttfts, 99)}
        scheduled = [r.ttft_sched_ms for r in done
                     if r.scheduled_ns is not None and r.ttft_sched_ms is not None]
        if scheduled:
            figures[name].update(ttft_sched_p50_ms=_pct(scheduled, 50),
                                 ttft_sched_p99_ms=_pct(scheduled, 99))
    return figures
