"""A verdict on every run: `valid`, or `invalid` with the reasons, from a closed list.

A run is invalid when its numbers may describe something other than the engine doing the
workload: the load generator falling behind, the host starving the engine's API server, the
engine doing less (or other) work than asked, or too little of it to measure. Invalid runs are
kept and shown, never ranked. Warnings (loadtest/results/checks.py) say what to look at; a reason here
says the number cannot be defended as it stands.

Limits, and why:
- client: CPU peak above 90% of a core, or the event loop waking more than 20 ms late at p99
  (loadtest/client/loop_lag.py; a loop that keeps up wakes within ~1 ms), or streamed events per second
  per process above what this machine measured faithfully (scripts/calibrate.sh).
- engine front end: the client's mean TTFT above the engine's own (/metrics, same window) by more
  than 250 ms and by more than half: clean runs of vLLM on 2 shared cores show +55-70 ms for
  this rig and a lean asyncio client alike; stalled ones +750-1,550 ms.
- open loop (--rate): the p99 of the requests' send lag (actual send - scheduled send) above
  SEND_LAG_LIMIT_MS = 50 ms. A client that keeps up sends within a few ms of the schedule (on
  the shared 2-core machine, engine beside it, Poisson at 4 req/s: median 0.7 ms, worst of 24
  sends 24 ms; tests/test_open_loop.py); the limit sits above the event-loop lag limit (20 ms)
  with room for a busy host. Lag comes from the
  client falling behind or from the --users cap being full (`capped_requests`, `cap_wait_*`):
  either way the offered rate was not the rate sent, and only the latency from the schedule
  (`ttft_sched_*`, `e2e_sched_*`) says what a user arriving on schedule would have waited.
  In open loop `too_few_requests` does not apply: --users is a cap, not the load.
Connections the server closed before answering (`reconnects`) are a warning, not a reason:
llama.cpp's server closes the connection after every streamed answer by design (measured on an
H100: a lean aiohttp client met it on 896 of 1,024 requests), so it says nothing about a starved
front end; a vLLM front end that drops requests it did not read in time also shows as
front_end_lag, since those requests wait the keep-alive timeout first.
"""

from __future__ import annotations

from typing import Any

from loadtest.calibration.limits import events_per_s

__all__ = ["REASONS", "engine_held_peak", "judge"]

CLIENT_CPU_LIMIT_PCT = 90.0
LOOP_LAG_LIMIT_MS = 20.0
FRONT_END_GAP_MS = 250.0
FRONT_END_GAP_RATIO = 0.5
SEND_LAG_LIMIT_MS = 50.0

REASONS = {
    "failed_requests": "some requests failed, so the workload was not done as asked",
    "client_overloaded": "the load generator fell behind (CPU peak above 90% of a core, or its "
                         "event loop woke over 20 ms late at p99): its timestamps carry its own "
                         "delays; add --processes or run the client on other cores",
    "client_past_calibrated_rate": "more streamed events per second per client process than this "
                                   "machine measured faithfully (scripts/calibrate.sh): add "
                                   "--processes",
    "behind_schedule": "open loop: sends lagged their scheduled times by over 50 ms at p99 "
                       "(send_lag_p99_ms), so the rate asked was not the rate sent: the --users "
                       "cap was full (capped_requests) or the client fell behind; latency from "
                       "the schedule (ttft_sched_*) shows the queueing; raise --users or lower "
                       "--rate",
    "front_end_lag": "the client's mean TTFT is over 250 ms and 50% above the engine's own "
                     "(its /metrics over the run): requests waited in the engine's API server or "
                     "the host, so the numbers describe the host, not the engine",
    "answers_arrived_whole": "long answers arrived in one burst (buffered_requests): the "
                             "engine's API server was starved, or a proxy buffered the stream",
    "unequal_work": "--ignore-eos was asked but output lengths differ by more than 10%: the "
                    "engine did not keep to the requested length",
    "engine_shared": "the engine held more requests than this run's users: another client "
                     "shared it",
    "token_count_mismatch": "--recount: the engine's reported output tokens differ from the "
                            "token ids it streamed, so tok/s counts work that was not done as "
                            "reported",
    "engine_flaws": "the engine answered wrongly (flawed_requests, engine_flaws): values the "
                    "rig had to ignore, so its numbers rest partly on the rig's own counts",
    "too_few_requests": "fewer than 2 requests per user: ramp-up and tail, not a steady state",
    "short_run": "under 5 s: too short to measure",
    "warmup": "a warm-up run: measured, never ranked",
}


def judge(row: dict[str, Any], faithful_events_per_s: float | None = None) -> tuple[str, list[str]]:
    """("valid", []) or ("invalid", reasons in REASONS order)."""
    found = {name for name, test in _TESTS.items() if test(row)}
    events = events_per_s(row)
    # a limit of 0 (no load was measured faithfully) says nothing usable about this run
    if faithful_events_per_s and events and events > faithful_events_per_s:
        found.add("client_past_calibrated_rate")
    reasons = [name for name in REASONS if name in found]
    return ("invalid" if reasons else "valid"), reasons


def engine_held_peak(row: dict[str, Any]) -> float:
    """The most requests the engine held at one scrape; rows from before that column existed
    fall back to the sum of the two peaks (an upper bound: they need not coincide)."""
    if row.get("engine_held_peak") is not None:
        return float(row["engine_held_peak"])
    return float((row.get("engine_running_peak") or 0) + (row.get("engine_waiting_peak") or 0))


def _front_end_lag(row: dict[str, Any]) -> bool:
    client, engine = row.get("ttft_mean_ms"), row.get("engine_ttft_mean_ms")
    if client is None or engine is None:
        return False
    gap = client - engine
    return gap > FRONT_END_GAP_MS and gap > FRONT_END_GAP_RATIO * engine


def _open_loop(row: dict[str, Any]) -> bool:
    return row.get("rate") not in (None, "")


def _unequal_work(row: dict[str, Any]) -> bool:
    low, high = row.get("min_output_tokens"), row.get("max_output_tokens")
    return bool(row.get("ignore_eos")) and low is not None and bool(high) and high - low > 0.1 * high


_TESTS = {
    "failed_requests": lambda r: bool(r.get("failed")),
    "client_overloaded": lambda r: ((r.get("client_cpu_max_pct") or 0) > CLIENT_CPU_LIMIT_PCT
                                    or (r.get("loop_lag_p99_ms") or 0) > LOOP_LAG_LIMIT_MS),
    "behind_schedule": lambda r: (r.get("send_lag_p99_ms") or 0) > SEND_LAG_LIMIT_MS,
    "front_end_lag": _front_end_lag,
    "answers_arrived_whole": lambda r: bool(r.get("buffered_requests")),
    "unequal_work": _unequal_work,
    "engine_shared": lambda r: engine_held_peak(r) > (r.get("users") or 0),
    "token_count_mismatch": lambda r: bool(r.get("recount_count_mismatches")),
    "engine_flaws": lambda r: bool(r.get("flawed_requests")),
    "too_few_requests": lambda r: (not _open_loop(r)
                                   and (r.get("requests") or 0) < 2 * (r.get("users") or 0)),
    "short_run": lambda r: (r.get("completion_time_s") or 0) < 5,
    "warmup": lambda r: bool(r.get("warmup")),
}
