"""Telemetry samples -> the columns a run's row carries.

- gpu_mem_peak_mib: the highest total memory used over the sampled GPUs at one sample time.
- gpu_util_mean_pct, gpu_power_mean_w: mean over samples (power summed over GPUs first).
- gpu_energy_j: NVML's total-energy counter, last sample minus first, summed over GPUs; a GPU
  without the counter has its power integrated over time instead (gpu_energy_source says which).
  The window is the sampler's (run start -> run finish), so idle time at the edges counts.
- gpu_j_per_output_token: gpu_energy_j / the run's output tokens (set by the caller).
- engine_*_peak: highest value scraped; engine_held_peak: the most requests the engine held at
  one scrape (running + waiting at the same moment: the two peaks need not coincide); engine_queue_time_mean_ms, engine_ttft_mean_ms,
  engine_e2e_mean_ms: the engine's own means over the requests it finished (queueing, first
  token, whole request) during the window, from its histograms' sums and counts.
- engine_prefix_cache_hit_tokens, engine_prefix_cache_query_tokens: prompt tokens the engine
  found in its prefix cache, and looked up there, during the window (its counters' change;
  llama.cpp counts misses, so its lookups are hits + misses); engine_prefix_cache_hit_pct is
  their ratio. SGLang exports only a recent hit rate: its pct is that gauge's mean over the
  window, with no token counts.
- engine_spec_drafted_tokens, engine_spec_accepted_tokens: draft tokens the engine's speculative
  decoding proposed, and the target model accepted, during the window; engine_spec_accept_pct
  is their ratio (absent where the engine does not speculate).

Beside the row, telemetry_summary.json keeps ``telemetry_per_gpu`` (per_gpu_summary): each GPU's
mean and peak utilization, peak memory and mean power, so a layout that leaves one GPU idle
shows it (the row's gpu_util_mean_pct pools all GPUs).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from statistics import fmean
from typing import Any

from loadtest.telemetry.engine import HISTOGRAMS, PREFIX_COUNTERS, SPEC_COUNTERS

__all__ = ["per_gpu_summary", "per_token_columns", "summarize_telemetry"]

Sample = dict[str, Any]


def summarize_telemetry(samples: list[Sample], state: dict[str, str]) -> dict[str, Any]:
    gpu = [s for s in samples if s.get("source") == "gpu"]
    engine = sorted((s for s in samples if s.get("source") == "engine"), key=lambda s: s["t"])
    row: dict[str, Any] = {"telemetry_gpu": state["gpu"], "telemetry_engine": state["engine"]}
    if samples:
        times = [s["t"] for s in samples]
        row["telemetry_window_s"] = max(times) - min(times)
    if gpu:
        row.update(_gpu_columns(gpu))
    if engine:
        row.update(_engine_columns(engine))
    return row


def per_gpu_summary(samples: list[Sample]) -> list[dict[str, Any]]:
    """One entry per sampled GPU (by NVML index): util mean/max %, memory peak, power mean."""
    per_gpu: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.get("source") == "gpu":
            per_gpu[s["gpu"]].append(s)
    out = []
    for index, one in sorted(per_gpu.items()):
        entry: dict[str, Any] = {
            "gpu": index, "samples": len(one),
            "util_mean_pct": fmean(s["util_pct"] for s in one),
            "util_max_pct": max(s["util_pct"] for s in one),
            "mem_peak_mib": max(s["mem_used_mib"] for s in one),
            "mem_total_mib": one[0].get("mem_total_mib")}
        power = [s["power_w"] for s in one if s.get("power_w") is not None]
        if power:
            entry["power_mean_w"] = fmean(power)
        out.append(entry)
    return out


def per_token_columns(row: dict[str, Any], output_tokens: int | None) -> dict[str, Any]:
    energy = row.get("gpu_energy_j")
    if energy is None or not output_tokens:
        return {}
    return {"gpu_j_per_output_token": energy / output_tokens}


def _gpu_columns(gpu: list[Sample]) -> dict[str, Any]:
    memory_at: dict[float, float] = defaultdict(float)
    power_at: dict[float, float] = defaultdict(float)
    per_gpu: dict[int, list[Sample]] = defaultdict(list)
    for s in gpu:
        memory_at[s["t"]] += s["mem_used_mib"]
        if s.get("power_w") is not None:
            power_at[s["t"]] += s["power_w"]
        per_gpu[s["gpu"]].append(s)
    row: dict[str, Any] = {
        "gpu_count": len(per_gpu),
        "gpu_mem_peak_mib": max(memory_at.values()),
        "gpu_util_mean_pct": fmean(s["util_pct"] for s in gpu),
    }
    if power_at:
        row["gpu_power_mean_w"] = fmean(power_at.values())
    energies, sources = [], set()
    for one in per_gpu.values():
        joules, source = _energy_j(sorted(one, key=lambda s: s["t"]))
        if joules is not None:
            energies.append(joules)
            sources.add(source)
    if energies:
        row["gpu_energy_j"] = sum(energies)
        row["gpu_energy_source"] = "+".join(sorted(sources))
    return row


def _energy_j(one: list[Sample]) -> tuple[float | None, str]:
    counter = [s["energy_mj"] for s in one if s.get("energy_mj") is not None]
    if len(counter) >= 2:
        return (counter[-1] - counter[0]) / 1000, "nvml_energy_counter"
    power = [(s["t"], s["power_w"]) for s in one if s.get("power_w") is not None]
    if len(power) >= 2:
        return sum((p0 + p1) / 2 * (t1 - t0) for (t0, p0), (t1, p1) in pairwise(power)), \
            "power_integral"
    return None, ""


def _engine_columns(engine: list[Sample]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for field, column in (("running", "engine_running_peak"), ("waiting", "engine_waiting_peak"),
                          ("kv_cache_pct", "engine_kv_cache_peak_pct")):
        values = [s[field] for s in engine if s.get(field) is not None]
        if values:
            row[column] = max(values)
    held = [s["running"] + s.get("waiting", 0) for s in engine if s.get("running") is not None]
    if held:
        row["engine_held_peak"] = max(held)
    row.update(_prefix_cache_columns(engine))
    row.update(_speculation_columns(engine))
    for field in HISTOGRAMS:
        seen = [s for s in engine if s.get(f"{field}_count") is not None]
        if len(seen) >= 2:
            d_count = seen[-1][f"{field}_count"] - seen[0][f"{field}_count"]
            d_sum = seen[-1][f"{field}_sum_s"] - seen[0][f"{field}_sum_s"]
            if d_count > 0:
                row[f"engine_{field}_mean_ms"] = 1000 * d_sum / d_count
                row[f"engine_{field}_count"] = int(d_count)
    return row


def _changes(engine: list[Sample], fields: list[str]) -> dict[str, float]:
    """Each running counter's change from the window's first scrape to its last."""
    change: dict[str, float] = {}
    for field in fields:
        seen = [s[field] for s in engine if s.get(field) is not None]
        if len(seen) >= 2:
            change[field] = seen[-1] - seen[0]
    return change


def _speculation_columns(engine: list[Sample]) -> dict[str, Any]:
    change = _changes(engine, list(SPEC_COUNTERS.values()))
    drafted, accepted = change.get("spec_drafted_tokens"), change.get("spec_accepted_tokens")
    if drafted is None or accepted is None:
        return {}
    row: dict[str, Any] = {"engine_spec_drafted_tokens": int(drafted),
                           "engine_spec_accepted_tokens": int(accepted)}
    if drafted > 0:
        row["engine_spec_accept_pct"] = 100 * accepted / drafted
    return row


def _prefix_cache_columns(engine: list[Sample]) -> dict[str, Any]:
    change = _changes(engine, list(PREFIX_COUNTERS.values()))
    row: dict[str, Any] = {}
    hits = change.get("prefix_hit_tokens")
    queries = change.get("prefix_query_tokens")
    if queries is None and hits is not None and "prefix_miss_tokens" in change:
        queries = hits + change["prefix_miss_tokens"]
    if hits is not None and queries is not None:
        row["engine_prefix_cache_hit_tokens"] = int(hits)
        row["engine_prefix_cache_query_tokens"] = int(queries)
        if queries > 0:
            row["engine_prefix_cache_hit_pct"] = 100 * hits / queries
        return row
    rates = [s["prefix_hit_rate"] for s in engine if s.get("prefix_hit_rate") is not None]
    if rates:
        row["engine_prefix_cache_hit_pct"] = 100 * fmean(rates)
    return row
