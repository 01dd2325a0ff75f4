"""GPU, engine and client telemetry of a run, sampled in a process of its own.

    python -m loadtest.telemetry --run-dir DIR --engine vllm --url http://127.0.0.1:8000

Files, beside the run's requests.jsonl:
    telemetry.jsonl          one line per sample: t (unix s), source ("gpu" | "engine"), fields;
                             the first line (source "sampler") says what is sampled
    telemetry_summary.json   the columns merged into the run's row (see summary.py)
    telemetry.log            the sampler's stderr

GPU fields: gpu (NVML index), mem_used_mib, mem_total_mib, util_pct, mem_util_pct, power_w,
energy_mj (NVML total-energy counter), sm_clock_mhz, mem_clock_mhz, temp_c.
Engine fields: running, waiting, kv_cache_pct, {queue_time,ttft,e2e}_{sum_s,count}, and the
prefix cache's running totals prefix_{hit,query,miss}_tokens (or SGLang's prefix_hit_rate); the
names each engine exports them under are in its spec (servers/<slug>.py).
"""

from loadtest.telemetry.hook import Telemetry, gpu_selection, start_telemetry
from loadtest.telemetry.summary import per_token_columns, summarize_telemetry

__all__ = [
           "Telemetry",
           "gpu_selection",
           "per_token_columns",
           "start_telemetry",
           "summarize_telemetry",
]
