"""The engine's own view, scraped from its Prometheus /metrics: running and waiting requests,
KV-cache use, and its own queue time, TTFT and end-to-end latency, under one set of names for
every engine.

Names per engine (see /work/shared/research/engines.md, "Metrics"): a gauge present under
several label sets (data-parallel ranks, models) is summed for counts and maxed for KV cache.
Queue time, TTFT and end-to-end latency are histograms: their running `_sum` (s) and `_count`
are kept, so any interval's mean is d(sum)/d(count) (the run's verdict compares the engine's
TTFT with the client's over the run's window). KV cache is a fraction in every engine here; it is stored in percent.
"""

from __future__ import annotations

import urllib.request
from typing import Any

__all__ = ["ENGINE_METRICS", "HISTOGRAMS", "engine_sample", "metric_names_for", "parse_prometheus", "scrape"]

_VLLM = {"running": ["num_requests_running"], "waiting": ["num_requests_waiting"],
         "kv_cache": ["kv_cache_usage_perc", "gpu_cache_usage_perc"],
         "queue_time": ["request_queue_time_seconds"], "ttft": ["time_to_first_token_seconds"],
         "e2e": ["e2e_request_latency_seconds"]}
HISTOGRAMS = ("queue_time", "ttft", "e2e")

# canonical field -> metric names, first found wins (newer name first)
ENGINE_METRICS: dict[str, dict[str, list[str]]] = {
    "vllm": {k: [f"vllm:{n}" for n in v] for k, v in _VLLM.items()},
    "aphrodite": {k: [f"aphrodite:{n}" for n in v] for k, v in _VLLM.items()},
    "lmdeploy": {k: [f"lmdeploy:{n}" for n in v] for k, v in _VLLM.items()},
    "tgi": {"running": ["tgi_batch_current_size"], "waiting": ["tgi_queue_size"],
            "kv_cache": [], "queue_time": ["tgi_request_queue_duration"],
            "e2e": ["tgi_request_duration"]},
    "sglang": {"running": ["sglang:num_running_reqs"], "waiting": ["sglang:num_queue_reqs"],
               "kv_cache": ["sglang:token_usage"], "queue_time": [],
               "ttft": ["sglang:time_to_first_token_seconds"],
               "e2e": ["sglang:e2e_request_latency_seconds"]},
    "llamacpp": {"running": ["llamacpp:requests_processing"],
                 "waiting": ["llamacpp:requests_deferred"],
                 "kv_cache": ["llamacpp:kv_cache_usage_ratio"], "queue_time": []},
}
_ALIASES = {"vllm-cpu": "vllm"}
_TIMEOUT_S = 2.0


def metric_names_for(engine: str) -> dict[str, list[str]] | None:
    """The metric names of `engine`, or None for an engine with no Prometheus endpoint."""
    return ENGINE_METRICS.get(_ALIASES.get(engine, engine))


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


def scrape(url: str) -> str:
    """GET URL/metrics; raises OSError (urllib's errors included) when it cannot."""
    with urllib.request.urlopen(f"{url.rstrip('/')}/metrics", timeout=_TIMEOUT_S) as response:
        return response.read().decode("utf-8", "replace")


def engine_sample(samples: dict[str, list[float]], names: dict[str, list[str]]) -> dict[str, Any]:
    """The canonical fields found in one scrape (a field the engine does not export is absent)."""
    row: dict[str, Any] = {}
    for field in ("running", "waiting"):
        values = _first(samples, names[field])
        if values is not None:
            row[field] = sum(values)
    kv = _first(samples, names["kv_cache"])
    if kv is not None:
        row["kv_cache_pct"] = 100 * max(kv)
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
