"""A verdict on every run: `valid`, or `invalid` with the reasons, from a closed list.

A run is invalid when its numbers may describe something other than the engine doing the
workload: the load generator falling behind, the host starving the engine's API server, the
engine doing less (or other) work than asked, or too little of it to measure. Invalid runs are
kept and shown, never ranked. Warnings (loadtest/results/checks.py) say what to look at; a reason
here says the number cannot be defended as it stands. The reasons, their limits and why each
limit sits where it does, their messages and remedies: loadtest/results/rules.py (REASON_RULES).

Two reasons read more than the row:
- client_past_calibrated_rate: streamed events per second per client process
  (loadtest/results/events.py) above what this machine measured faithfully
  (scripts/calibrate.sh), a limit the caller passes in.
- behind_schedule (open loop): send lag comes from the client falling behind or from the
  --users cap being full (`capped_requests`, `cap_wait_*`): either way the offered rate was not
  the rate sent, and only the latency from the schedule (`ttft_sched_*`, `e2e_sched_*`) says
  what a user arriving on schedule would have waited. In open loop `too_few_requests` does not
  apply: --users is a cap, not the load.
Connections the server closed before answering (`reconnects`) are a warning, not a reason:
llama.cpp's server closes the connection after every streamed answer by design (measured on an
H100: a lean aiohttp client met it on 896 of 1,024 requests), so it says nothing about a starved
front end; a vLLM front end that drops requests it did not read in time also shows as
front_end_lag, since those requests wait the keep-alive timeout first.
"""

from __future__ import annotations

from typing import Any

from loadtest.results.events import events_per_s
from loadtest.results.rules import REASON_RULES, REASONS, engine_held_peak

__all__ = ["REASONS", "engine_held_peak", "judge"]


def judge(row: dict[str, Any], faithful_events_per_s: float | None = None) -> tuple[str, list[str]]:
    """("valid", []) or ("invalid", reasons in REASON_RULES order)."""
    found = {rule.code for rule in REASON_RULES if rule.applies(row)}
    events = events_per_s(row)
    # a limit of 0 (no load was measured faithfully) says nothing usable about this run
    if faithful_events_per_s and events and events > faithful_events_per_s:
        found.add("client_past_calibrated_rate")
    reasons = [rule.code for rule in REASON_RULES if rule.code in found]
    return ("invalid" if reasons else "valid"), reasons
