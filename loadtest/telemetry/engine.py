"""The engine's own view, scraped from its Prometheus /metrics: running and waiting requests,
KV-cache use, its own queue time, TTFT and end-to-end latency, and its prefix-cache hits, under
one set of names for every engine.

The names per engine are its spec's (``EngineSpec.metrics``, servers/<slug>.py): a gauge present
under several label sets (data-parallel ranks, models) is summed for counts and maxed for KV
cache. Queue time, TTFT and end-to-end latency are histograms: their running `_sum` (s) and
`_count` are kept, so any interval's mean is d(sum)/d(count) (the run's verdict compares the
engine's TTFT with the client's over the run's window). KV cache is a fraction in every engine
here; it is stored in percent. Prefix-cache counters (prompt tokens found in the cache, and
looked up or missed) are kept as running totals, so a run's hits are their change over its
window; SGLang exports only a recent hit rate (a gauge), kept as a fraction. Speculative
decoding's counters (draft tokens proposed, and accepted by the target model) are running totals
too.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable
from typing import Any

from servers.registry import SPECS

__all__ = ["ENGINE_METRICS", "HISTOGRAMS", "PREFIX_COUNTERS", "SPEC_COUNTERS", "engine_sample",
           "merged_samples", "metric_names_for", "parse_prometheus", "scrape"]

HISTOGRAMS = ("queue_time", "ttft", "e2e")
# canonical counter -> the sample field holding its running total (prompt tokens)
PREFIX_COUNTERS = {"prefix_hits": "prefix_hit_tokens", "prefix_queries": "prefix_query_tokens",
                   "prefix_misses": "prefix_miss_tokens"}
# canonical counter -> the sample field holding its running total (speculated tokens)
SPEC_COUNTERS = {"spec_drafted": "spec_drafted_tokens", "spec_accepted": "spec_accepted_tokens"}

# canonical field -> metric names, first found wins (newer name first); a view of the specs
ENGINE_METRICS: dict[str, dict[str, list[str]]] = {
    slug: s.metrics for slug, s in SPECS.items() if s.metrics is not None}
_TIMEOUT_S = 2.0


def metric_names_for(engine: str) -> dict[str, list[str]] | None:
    """The metric names of `engine`, or None for an engine with no Prometheus endpoint."""
    return ENGINE_METRICS.get(engine)


def merged_samples(texts: Iterable[str]) -> dict[str, list[float]]:
    """Several endpoints' Prometheus text (an engine's replicas behind a balancer) as one
    engine's samples: each replica's value of a metric is one more label set, so counts and
    counters add up and KV cache is the fullest replica's, as engine_sample treats label sets."""
    merged: dict[str, list[float]] = {}
    for text in texts:
        for name, values in parse_prometheus(text).items():
            merged.setdefault(name, []).extend(values)
    return merged


def parse_prometheus(text: str) -> dict[str, list[float]]:
    """Prometheus text format -> {sample name: values of its label sets}. Comments skipped."""
    samples: dict[str, list[float]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, rest = line.split("{", 1)
            rest = rest.rsplit("}", 1)[-1]
        else:
            name, _, rest = line.partition(" ")
        parts = rest.split()
        if not parts:
            continue
        try:
            samples.setdefault(name.strip(), []).append(float(parts[0]))
        except ValueError:
            continue
    return samples


def scrape(url: str, timeout_s: float = _TIMEOUT_S) -> str:
    """GET URL/metrics; raises OSError (urllib's errors included) when it cannot."""
    with urllib.request.urlopen(f"{url.rstrip('/')}/metrics", timeout=timeout_s) as response:
        return response.read().decode("utf-8", "replace")


def engine_sample(samples: dict[str, list[float]], names: dict[str, list[str]]) -> dict[str, Any]:
    """The canonical fields found in one scrape (a field the engine does not export is absent)."""
    row: dict[str, Any] = {}
    for field in ("running", "waiting"):
        values = _first(samples, names.get(field, []))
        if values is not None:
            row[field] = sum(values)
    kv = _first(samples, names.get("kv_cache", []))
    if kv is not None:
        row["kv_cache_pct"] = 100 * max(kv)
    for field, column in (*PREFIX_COUNTERS.items(), *SPEC_COUNTERS.items()):
        values = _first(samples, names.get(field, []))
        if values is not None:
            row[column] = sum(values)
    rate = _first(samples, names.get("prefix_hit_rate", []))
    if rate is not None:
        row["prefix_hit_rate"] = max(rate)
    for field in HISTOGRAMS:
        for histogram in names.get(field, []):
            if f"{histogram}_count" in samples:
                row[f"{field}_sum_s"] = sum(samples.get(f"{histogram}_sum", [0.0]))
                row[f"{field}_count"] = sum(samples[f"{histogram}_count"])
                break
    return row


def _first(samples: dict[str, list[float]], names: list[str]) -> list[float] | None:
    for name in names:
        if name in samples:
            return samples[name]
    return None
