"""The progress line's cost per interval (loadtest/client/progress.py): Tally.update over the
records that arrived since the last line, both TTFT percentiles and the formatted line, for runs
of growing size; beside it Locust's own periodic table (stats.print_stats, what a headless run
printed every 2 s before), into a null stream. CPU time (process_time), median of repeats.

    .venv/bin/python evidence/2026-11-26/progress-line/micro_progress.py
"""

from __future__ import annotations

import io
import logging
import random
import statistics
import time

from locust.env import Environment
from locust import stats as locust_stats

from loadtest.client.progress import Snapshot, Tally, format_line
from loadtest.results.record import RequestRecord


def records(n: int, seed: int = 1) -> list[RequestRecord]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        sent = 10**9 * i
        first = sent + int(rng.lognormvariate(17.5, 0.6))  # ~40 ms TTFT, skewed
        kind = "timeout" if rng.random() < 0.001 else None
        out.append(RequestRecord(i, f"p{i}", 1e9 + i, sent, first_chunk_ns=first,
                                 done_ns=first + 10**8, output_tokens=128, error_kind=kind))
    return out


def line(tally: Tally, recs: list[RequestRecord], total: int) -> str:
    tally.update(recs)
    return format_line(Snapshot(elapsed_s=60.0, done=tally.done, total=total,
                                output_tokens=tally.output_tokens, ttft_p50_ms=tally.ttft_ms(50),
                                ttft_p99_ms=tally.ttft_ms(99), errors=dict(tally.errors),
                                cpu_pct=42.0))


def tick_cost_us(total: int, per_tick: int, repeats: int = 7) -> float:
    """CPU time of the line drawn once `per_tick` new records arrived on top of `total - per_tick`
    already counted (the sort then merges a long sorted run with a short new one)."""
    recs = records(total)
    times = []
    for _ in range(repeats):
        tally = Tally()
        line(tally, recs[:total - per_tick], total)
        start = time.process_time()
        line(tally, recs, total)
        times.append(time.process_time() - start)
    return statistics.median(times) * 1e6


def locust_table_us(repeats: int = 50) -> float:
    env = Environment()
    env.stats.log_request("completions", "vllm:mixed-256x128", 320, 128)
    for _ in range(2000):
        env.stats.log_request("completions", "vllm:mixed-256x128", random.randint(200, 900), 128)
    logger = logging.getLogger("locust.stats_logger")
    logger.handlers = [logging.StreamHandler(io.StringIO())]
    logger.propagate = False
    times = []
    for _ in range(repeats):
        start = time.process_time()
        locust_stats.print_stats(env.stats)
        times.append(time.process_time() - start)
    return statistics.median(times) * 1e6


if __name__ == "__main__":
    print("records so far | new since last line | CPU per line (us) | share of one core at 5 s")
    for total, per_tick in ((1_000, 200), (10_000, 1_000), (100_000, 5_000), (1_000_000, 5_000)):
        us = tick_cost_us(total, per_tick)
        print(f"{total:>14,} | {per_tick:>19,} | {us:>17,.0f} | {us / 5e6:.4%}")
    print(f"Locust's periodic table (one row), each 2 s before: {locust_table_us():,.0f} us")
