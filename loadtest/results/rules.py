"""Every warning and verdict reason a run can carry: one table, read by the checks themselves.

    Rule(code, message, remedy, limits, fires)
        limits   the thresholds the rule holds a row to, by name;
        message  what it means, a template formatted from those same limits;
        remedy   what to do about it ("" when there is nothing to do but read the message);
        fires    the test on a run row (dict of the row's values), given the rule's limits.
    WARNING_RULES  say what to look at (loadtest/results/checks.py: check_run);
    REASON_RULES   say a number cannot be defended as it stands: the run is `invalid`
                   (loadtest/results/verdict.py: judge); kept and shown, never ranked.
    WARNINGS, REASONS   code -> printed text (message: remedy), in the table's order.
    ERROR_REMEDIES      what to do about each kind of failed request (record.py's ERROR_KINDS).
    markdown()          the table of docs/measurement.md (loadtest/results/docs.py writes it).

The limits shared by a warning and a reason (a client's CPU, requests per user, a run's length,
output lengths) are one constant each below, so the two can never disagree. Why each limit sits
where it does is said beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ERROR_REMEDIES", "REASONS", "REASON_RULES", "Rule", "WARNINGS", "WARNING_RULES",
           "engine_held_peak", "markdown"]

Row = Mapping[str, Any]

# Locust's own runner warns above 90% CPU that timings may be inconsistent
CLIENT_CPU_LIMIT_PCT = 90.0
# a loop that keeps up wakes within ~1 ms (loadtest/client/loop_lag.py)
LOOP_LAG_LIMIT_MS = 20.0
# a worker's clock matched to the master's within this (half a round trip: ~0.1 ms on one bridge,
# tests/test_hosts_network.py); past it, times across workers (completion, schedule) carry it
CLOCK_SYNC_LIMIT_MS = 5.0
# clean runs of vLLM on 2 shared cores show the client's mean TTFT +55-70 ms above the engine's
# own, for this rig and a lean asyncio client alike; stalled ones +750-1,550 ms
FRONT_END_GAP_MS = 250.0
FRONT_END_GAP_PCT = 50.0
# a client that keeps up sends within a few ms of the schedule (shared 2-core machine, engine
# beside it, Poisson at 4 req/s: median 0.7 ms, worst of 24 sends 24 ms; tests/test_open_loop.py);
# above the event-loop limit, with room for a busy host
SEND_LAG_LIMIT_MS = 50.0
# an engine's Python API server runs its event loop on one thread: near a full core it takes no
# more (one vLLM API server carried 12,000-14,500 tok/s whatever the model, and held a server
# split over two GPUs to that while its GPUs waited: evidence/2026-11-27/gpu-layouts, lease K);
# 90% as for the client's own processes
FRONT_END_CPU_LIMIT_PCT = 90.0
# fewer requests per user measure ramp-up and tail, not a steady state
MIN_REQUESTS_PER_USER = 2
# shorter runs are noise
MIN_RUN_S = 5.0
# output lengths further apart than this share of the longest are unequal work
OUTPUT_SPREAD_PCT = 10.0


@dataclass(frozen=True)
class Rule:
    code: str
    message: str  # a template: {name} is limits[name]
    remedy: str = ""
    limits: Mapping[str, float] = field(default_factory=dict)
    fires: Callable[[Row, Mapping[str, float]], bool] | None = None  # None: the caller decides

    @property
    def text(self) -> str:
        """What is printed and documented: the message from the limits, then the remedy."""
        message = self.message.format(**self.limits)
        return f"{message}; {self.remedy}" if self.remedy else message

    def applies(self, row: Row) -> bool:
        return self.fires is not None and self.fires(row, self.limits)


def engine_held_peak(row: Row) -> float:
    """The most requests the engine held at one scrape; rows from before that column existed
    fall back to the sum of the two peaks (an upper bound: they need not coincide)."""
    if row.get("engine_held_peak") is not None:
        return float(row["engine_held_peak"])
    return float((row.get("engine_running_peak") or 0) + (row.get("engine_waiting_peak") or 0))


def _open_loop(row: Row) -> bool:
    return row.get("rate") not in (None, "")


def _uneven(row: Row, spread: float) -> bool:
    """Answers of unequal length, where one length was asked of them all (with several asked,
    output_off_asked_max_pct judges each answer against its own ask)."""
    if row.get("output_off_asked_max_pct") is not None:
        return False
    low, high = row.get("min_output_tokens"), row.get("max_output_tokens")
    return low is not None and bool(high) and high - low > spread * high


def _off_ask(row: Row, spread: float) -> bool:
    """--ignore-eos not kept: answers apart by more than `spread` where one length was asked,
    or one answer off its own ask by more than that where each request asked its own."""
    missed = row.get("output_off_asked_max_pct")
    if missed is not None:
        return missed > 100 * spread
    return _uneven(row, spread)


def _too_few(row: Row, limits: Mapping[str, float]) -> bool:
    """In open loop --users is a cap, not the load: the rule does not apply."""
    return (not _open_loop(row)
            and (row.get("requests") or 0) < limits["per_user"] * (row.get("users") or 0))


def _short(row: Row, limits: Mapping[str, float]) -> bool:
    return (row.get("completion_time_s") or 0) < limits["seconds"]


def _front_end_lag(row: Row, limits: Mapping[str, float]) -> bool:
    client, engine = row.get("ttft_mean_ms"), row.get("engine_ttft_mean_ms")
    if client is None or engine is None:
        return False
    gap = client - engine
    return gap > limits["gap_ms"] and gap > limits["gap_pct"] / 100 * engine


def _shared(row: Row, _: Mapping[str, float]) -> bool:
    return engine_held_peak(row) > (row.get("users") or 0)


def _has(column: str) -> Callable[[Row, Mapping[str, float]], bool]:
    return lambda row, _: bool(row.get(column))


def _starts(column: str, prefix: str) -> Callable[[Row, Mapping[str, float]], bool]:
    return lambda row, _: str(row.get(column) or "").startswith(prefix)


_FEW = {"per_user": MIN_REQUESTS_PER_USER}
_SHORT = {"seconds": MIN_RUN_S}
_SPREAD = {"spread_pct": OUTPUT_SPREAD_PCT}

WARNING_RULES: tuple[Rule, ...] = (
    Rule("client_cpu_high",
         "a client process peaked above {cpu_pct:g}% of a core, so it may have delayed its own "
         "timestamps", "add --processes, or fewer users per process",
         {"cpu_pct": CLIENT_CPU_LIMIT_PCT},
         lambda row, lim: (row.get("client_cpu_max_pct") or 0) > lim["cpu_pct"]),
    Rule("clock_sync_loose",
         "a worker's clock was matched to the master's only within more than {ms:g} ms, so "
         "times compared across workers (the run's span, an open-loop schedule) carry that error",
         "put the workers on the master's network, nearer it, or the run on fewer hosts",
         {"ms": CLOCK_SYNC_LIMIT_MS},
         lambda row, lim: (row.get("clock_sync_error_ms") or 0) > lim["ms"]),
    Rule("failed_requests", "some requests failed", "see the errors column and requests.jsonl",
         fires=_has("failed")),
    Rule("output_tokens_from_chunks",
         "the engine reported no usable token count for some or all requests, so their output "
         "tokens are counted stream chunks (a chunk may hold several tokens)",
         fires=lambda row, _: "chunks" in (row.get("output_tokens_source") or "")),
    Rule("uneven_output_lengths",
         "requests stopped at different lengths (min and max differ by more than "
         "{spread_pct:g}%), so tok/s compares unequal work", "use --ignore-eos", _SPREAD,
         lambda row, lim: _uneven(row, lim["spread_pct"] / 100)),
    Rule("too_few_requests",
         "fewer than {per_user:g} requests per user: the run measures ramp-up and tail, not a "
         "steady state", "raise --requests", _FEW, _too_few),
    Rule("short_run", "the run took under {seconds:g} s; timings this short are noisy",
         "raise --requests", _SHORT, _short),
    Rule("buffered_streams",
         "some long answers arrived all at once (buffered_requests counts them), so their TTFT "
         "is their end-to-end time: a buffering proxy, or an engine whose API server is starved "
         "of CPU", "check what sits in between", fires=_has("buffered_requests")),
    Rule("front_end_saturated",
         "an API-server process of the engine held over {cpu_pct:g}% of a core "
         "(engine_front_end_cpu_max_pct), so its front end, not its GPUs, may have set this "
         "run's throughput: a layout with more API servers could do more, and a layout compared "
         "at fewer is compared by its front ends; and one run stands for little there: the same "
         "configuration's runs can differ by tens of percent, whichever client measures them "
         "(docs/measurement.md)", "repeat the run (--repeat, or a race's --until-known) and "
         "compare means; start more API servers (vLLM, Aphrodite: --api-server-count N, or "
         "replicas) and compare layouts with as many each way",
         {"cpu_pct": FRONT_END_CPU_LIMIT_PCT},
         lambda row, lim: (row.get("engine_front_end_cpu_max_pct") or 0) > lim["cpu_pct"]),
    Rule("empty_answers",
         "some completed requests streamed no text at all (empty_answers counts them), so TTFT, "
         "ITL and TPOT are over the others only: the engine generated tokens it never sent as "
         "text (text-generation-webui withholds all text after a replacement character, which "
         "a random-weight model's stray bytes make)",
         "see which with --keep-outputs; a real model's text streams", fires=_has("empty_answers")),
    Rule("reconnects",
         "the server closed kept-alive connections before answering, and those requests were "
         "sent again on a fresh connection (reconnects counts them; their times include the "
         "reconnect): normal for llama.cpp's server, which closes after every streamed answer; "
         "a sign of a starved API server elsewhere", fires=_has("reconnects")),
    Rule("rate_limited",
         "the endpoint answered 429 (rate limited): those requests waited as its Retry-After "
         "said and were sent again (rate_limited counts the 429s, rate_limited_wait_s their "
         "waiting); throughput then measures the endpoint's quota, not its engine",
         fires=_has("rate_limited")),
    Rule("engine_shared",
         "the engine held more requests at once than this run's users can send, so another "
         "client shared it and these numbers are not this run's alone", fires=_shared),
    Rule("engine_gauges_unread",
         "the engine's running and waiting gauges read zero at every scrape while requests were in "
         "flight (telemetry_engine is gauges_read_zero), so its request peaks are not in the row "
         "and whether another client shared the engine (engine_shared) could not be checked",
         "read its /metrics during a run (curl URL/metrics | grep requests_) and give the names "
         "it exports in servers/<engine>.py",
         fires=lambda row, _: row.get("telemetry_engine") == "gauges_read_zero"),
    Rule("engine_flaws",
         "the engine answered some requests with values the rig ignored (flawed_requests counts "
         "them, engine_flaws says what: a token count that is no count, a wrong Content-Type, a "
         "second [DONE]); their output tokens are counted chunks",
         "check what serves this endpoint, or a proxy in between", fires=_has("flawed_requests")),
    Rule("token_text_mismatch",
         "--recount: some answers' token ids do not decode, with the served model's tokenizer, "
         "to the text that arrived (recount_text_mismatches): the engine's tokenizer or its "
         "detokenizing differs from the model's", fires=_has("recount_text_mismatches")),
    Rule("prompt_tokens_mismatch",
         "the engine read some prompts as another token count than the workload built them to "
         "(prompt_tokens_mismatched counts them, prompt_tokens_mismatch_cause says why: a chat "
         "template, a BOS, another tokenizer)",
         "pass the served model's --tokenizer, or use --api completions for token-exact prompts",
         fires=_has("prompt_tokens_mismatched")),
    Rule("prefix_cache_not_reset",
         "the engine's prefix cache could not be emptied before the run (prefix_cache_reset says "
         "why), so prompts cached by earlier runs may have sped this one up",
         "restart the engine for a clean cache", fires=_starts("prefix_cache_reset", "failed")),
    Rule("client_shares_engine_cores",
         "this client ran on cores of an engine the rig started on this host (client_pinned_by "
         "says why), so each took CPU from the other: on a small machine such runs stall",
         "drop --no-pin, or start the engine without --no-pin",
         fires=_starts("client_pinned_by", "shared")),
)

def _behind_schedule(row: Row, lim: Mapping[str, float]) -> bool:
    """Open loop (a send lag measured): any process sent late, or a worker's clock could put its
    sends off the schedule by more than the same limit."""
    if row.get("send_lag_p99_ms") is None:
        return False
    return max(row.get("send_lag_p99_ms") or 0, row.get("send_lag_worst_worker_p99_ms") or 0,
               row.get("clock_sync_error_ms") or 0) > lim["send_lag_ms"]


REASON_RULES: tuple[Rule, ...] = (
    Rule("failed_requests", "some requests failed, so the workload was not done as asked",
         fires=_has("failed")),
    Rule("client_overloaded",
         "the load generator fell behind (CPU peak above {cpu_pct:g}% of a core, or its event "
         "loop woke over {loop_lag_ms:g} ms late at p99): its timestamps carry its own delays",
         "add --processes or run the client on other cores",
         {"cpu_pct": CLIENT_CPU_LIMIT_PCT, "loop_lag_ms": LOOP_LAG_LIMIT_MS},
         lambda row, lim: ((row.get("client_cpu_max_pct") or 0) > lim["cpu_pct"]
                           or (row.get("loop_lag_p99_ms") or 0) > lim["loop_lag_ms"])),
    # its limit is this machine's calibration (loadtest/calibration/), given to judge()
    Rule("client_past_calibrated_rate",
         "more streamed events per second per client process than this machine measured "
         "faithfully (scripts/calibrate.sh)", "add --processes"),
    Rule("behind_schedule",
         "open loop: sends lagged their scheduled times by over {send_lag_ms:g} ms at p99 "
         "(send_lag_p99_ms), so the rate asked was not the rate sent: the --users cap was full "
         "(capped_requests) or the client fell behind; latency from the schedule "
         "(ttft_sched_*) shows the queueing. With workers, any one worker's own p99 "
         "(send_lag_worst_worker_p99_ms) counts, and so does a worker's clock matched to the "
         "master's only within more than that (clock_sync_error_ms): its sends could be that far "
         "off the one schedule", "raise --users or lower --rate, or add workers (put them nearer "
         "the master for a clock match)",
         {"send_lag_ms": SEND_LAG_LIMIT_MS}, _behind_schedule),
    Rule("front_end_lag",
         "the client's mean TTFT is over {gap_ms:g} ms and {gap_pct:g}% above the engine's own "
         "(its /metrics over the run): requests waited in the engine's API server or the host, "
         "so the numbers describe the host, not the engine", "",
         {"gap_ms": FRONT_END_GAP_MS, "gap_pct": FRONT_END_GAP_PCT}, _front_end_lag),
    Rule("answers_arrived_whole",
         "long answers arrived in one burst (buffered_requests): the engine's API server was "
         "starved, or a proxy buffered the stream", fires=_has("buffered_requests")),
    Rule("unequal_work",
         "--ignore-eos was asked but output lengths differ by more than {spread_pct:g}% (or, "
         "where each request asked its own length, an answer missed its ask by more than that: "
         "output_off_asked_max_pct): the engine did not keep to the requested length", "", _SPREAD,
         lambda row, lim: bool(row.get("ignore_eos")) and _off_ask(row, lim["spread_pct"] / 100)),
    Rule("engine_shared", "the engine held more requests than this run's users: another client "
         "shared it", fires=_shared),
    Rule("token_count_mismatch",
         "--recount: the engine's reported output tokens differ from the token ids it streamed, "
         "so tok/s counts work that was not done as reported",
         fires=_has("recount_count_mismatches")),
    Rule("engine_flaws",
         "the engine answered wrongly (flawed_requests, engine_flaws): values the rig had to "
         "ignore, so its numbers rest partly on the rig's own counts",
         fires=_has("flawed_requests")),
    Rule("too_few_requests",
         "fewer than {per_user:g} requests per user: ramp-up and tail, not a steady state",
         "raise --requests", _FEW, _too_few),
    Rule("short_run", "under {seconds:g} s: too short to measure", "raise --requests", _SHORT,
         _short),
    Rule("warmup", "a warm-up run: measured, never ranked", fires=_has("warmup")),
)

WARNINGS: dict[str, str] = {rule.code: rule.text for rule in WARNING_RULES}
REASONS: dict[str, str] = {rule.code: rule.text for rule in REASON_RULES}

# What to do about each kind of failed request (loadtest/results/record.py's ERROR_KINDS),
# printed under the run's summary for the kinds it met.
ERROR_REMEDIES = {
    "connect": "nothing answered at --host: is the engine up, on that port?",
    "timeout": "the engine went silent for --read-timeout seconds: an overloaded or hung engine; "
               "fewer --users, or a longer --read-timeout for long prefills",
    "http_status": "the engine refused the request (its error is in requests.jsonl): check "
                   "--model, --max-tokens and the engine's log",
    "stream_error": "the engine sent an error event mid-stream: see its message in "
                    "requests.jsonl and the engine's log",
    "stream_protocol": "the answer is not the stream --api says (a field of the wrong type, bad "
                       "JSON or UTF-8, an overlong line, no stream at all): check --api, and "
                       "what serves --host (a proxy, a half-compatible server)",
    "truncated": "the stream ended before the engine finished it: the engine or a proxy closed "
                 "the connection (a crash, a restart, a proxy's timeout)",
    "rate_limited": "the endpoint kept answering 429: fewer --users or --rate, or a higher quota",
    "deadline": "the request ran past --request-deadline and was cut: an engine trickling its "
                "answer or streaming without end; raise --request-deadline only if the engine "
                "is truly that slow",
    "over_max_tokens": "the engine streamed far past max_tokens and was cut: it ignores "
                       "max_tokens (check the engine and --api), so its tok/s is not comparable",
}


def markdown() -> str:
    """The docs' table of every reason and warning (docs/measurement.md; loadtest/results/docs.py
    writes it), the limits as the checks hold them."""
    lines = ["| code | kind | limits | what it means | what to do |", "|---|---|---|---|---|"]
    for kind, rules in (("reason (invalid)", REASON_RULES), ("warning", WARNING_RULES)):
        for rule in rules:
            limits = ", ".join(f"{name} {value:g}" for name, value in rule.limits.items())
            lines.append(f"| `{rule.code}` | {kind} | {limits} | "
                         f"{rule.message.format(**rule.limits)} | {rule.remedy} |")
    return "\n".join(lines)
