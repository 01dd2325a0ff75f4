"""A latency's summary columns: `{metric}_{mean,p50,p90,p99}_ms` over its values in ms (numpy's
linear percentiles), None each where there are no values. The run's row (summary.py) and a
reasoning run's (reasoning.py) write theirs with it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["STATS", "distribution"]

STATS = ("mean", "p50", "p90", "p99")


def distribution(metric: str, values_ms: Sequence[float],
                 stats: Sequence[str] = STATS) -> dict[str, float | None]:
    if not len(values_ms):
        return {f"{metric}_{stat}_ms": None for stat in stats}
    array = np.asarray(values_ms, dtype=float)
    percentiles = [stat for stat in stats if stat != "mean"]
    found = dict(zip(percentiles, np.percentile(array, [float(s[1:]) for s in percentiles])))
    if "mean" in stats:
        found["mean"] = array.mean()
    return {f"{metric}_{stat}_ms": float(found[stat]) for stat in stats}
