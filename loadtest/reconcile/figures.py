"""The figures every definition recomputes, and the two ways most peers take a percentile
(MLPerf LoadGen's, in whole nanoseconds, is in mlperf.py).

A definition returns one `Figure` per metric it defines: the value, and in words how its
definition differs from the rig's (loadtest/results/summary.py) — the cause shown when the
value differs. A metric a peer does not report is left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["METRICS", "SAME_AS_RIG", "Figure", "distribution", "linear", "mean", "nearest_rank"]

# (key, what the table calls it), in the table's order
METRICS: tuple[tuple[str, str], ...] = (
    ("completed", "completed requests"), ("failed", "failed requests"),
    ("ttft_mean_ms", "TTFT mean (ms)"), ("ttft_p50_ms", "TTFT p50 (ms)"),
    ("ttft_p99_ms", "TTFT p99 (ms)"),
    ("itl_mean_ms", "ITL mean (ms)"), ("itl_p50_ms", "ITL p50 (ms)"),
    ("itl_p99_ms", "ITL p99 (ms)"),
    ("tpot_mean_ms", "TPOT mean (ms)"), ("tpot_p50_ms", "TPOT p50 (ms)"),
    ("tpot_p99_ms", "TPOT p99 (ms)"),
    ("e2e_mean_ms", "E2E mean (ms)"), ("e2e_p50_ms", "E2E p50 (ms)"),
    ("e2e_p99_ms", "E2E p99 (ms)"),
    ("output_tokens", "output tokens"), ("duration_s", "duration (s)"),
    ("output_tok_per_s", "output tok/s"), ("req_per_s", "requests/s"),
)

# the explanation of a figure defined as the rig defines it
SAME_AS_RIG = "(the rig's definition: a difference is the client's or the run's own)"


@dataclass(frozen=True)
class Figure:
    value: float | None
    how: str = ""  # how this definition differs from the rig's, in words ("" where it does not)


def linear(values: Sequence[float], percent: float) -> float | None:
    """numpy's default percentile: linear interpolation between the two nearest ranks (the
    rig, vLLM, LLMPerf through pandas)."""
    return float(np.percentile(np.asarray(values, dtype=float), percent)) if len(values) else None


def nearest_rank(values: Sequence[float], percent: float) -> float | None:
    """GuideLLM's: the smallest value whose cumulative share reaches p (the sorted values'
    element at ceil(n * p) - 1; `Percentiles.from_pdf`, np.searchsorted side="left")."""
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(len(ordered) * percent / 100) - 1)])


def mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def distribution(metric: str, values: Sequence[float], how: str,
                 percentile=linear) -> dict[str, Figure]:
    """mean, p50 and p99 of `values` as three figures sharing one explanation."""
    return {f"{metric}_mean_ms": Figure(mean(values), how),
            f"{metric}_p50_ms": Figure(percentile(values, 50), how),
            f"{metric}_p99_ms": Figure(percentile(values, 99), how)}
