"""What one request did, measured on the client. The metric definitions live here.

Timestamps are `time.perf_counter_ns()` (CLOCK_MONOTONIC on Linux: one clock for every process
on a host) taken the moment a stream line is handed over, before it is parsed.

- TTFT (`ttft_ms`): request sent -> first chunk that carries generated output (a reasoning
  model's reasoning, a tool call's fragment and answer text alike).
- Chunk gaps (`chunk_gaps_ns`): time between consecutive output-carrying chunks after the first;
  the pooled gaps of a run are its ITL (inter-token latency; a chunk may hold several tokens,
  which the record's `output_tokens` and `output_chunks` let a reader see).
- End-to-end (`e2e_ms`): request sent -> stream finished (last byte read).
- `output_tokens`: as the server reports it (`output_tokens_source`: "usage" for OpenAI
  usage, "details" for TGI details); "chunks" only when the server reported nothing, and then a
  warning is raised for the run.

`reconnects`: 1 when the server closed the kept-alive connection before answering a byte and
the request was sent again on a fresh connection (once; its times count from the first send).

`rate_limited`: how many times the endpoint answered 429 before it let the request through;
`rate_limited_wait_ns`: the time from the first send to the send let through, waited as each
429's Retry-After said. The request's times count from the send let through.

Open loop (--rate, loadtest/client/arrivals.py) adds `scheduled_ns`, the time the schedule
sent the request (same clock as `sent_ns`), and `cap_wait_ns`, how long it waited past that time
for a free user because all --users were busy. From the schedule:
- send lag (`send_lag_ms`): scheduled -> actually sent (the cap wait, the client's own delay and
  any 429 waiting);
- `ttft_sched_ms`, `e2e_sched_ms`: scheduled -> first chunk, -> stream finished: the latency a
  user arriving on schedule saw, queueing in the client included (coordinated omission).

Conversations (Workload.sessions, loadtest/client/conversation.py) add `session_id` and
`turn` (1 for the session's first turn) to each turn's record, and on the session's last
record `session_end`, why it ended (SESSION_ENDS), and `turns_not_sent`, how many of its turns
were never sent. A turn the engine refused because the conversation outgrew its context
(`context_refused`: HTTP 400 naming the context) ends its session `context_full`; it was sent
but neither served nor failed, and counts as neither. In open loop a later turn's
`scheduled_ns` is when its think time ended: it is due then, not on the session's schedule.

A reasoning stream (the engine sends its reasoning apart from its answer: loadtest/results/
reasoning.py) adds `first_reasoning_ns`, `last_reasoning_ns` (its first and last chunks of
reasoning), `first_answer_ns` (its first chunk of answer after reasoning started; None when the
answer never came), `reasoning_chunks` and `reasoning_tokens` (the engine's own count, from
usage.completion_tokens_details, where it sent one).

A checked answer (structured output and tool calls: loadtest/workload/answers.py) adds
`answer_check`: "valid", or the first reason it is not, from a closed list.

`error_kind` is one closed vocabulary for failed requests:
connect (no connection), timeout (no byte within the read timeout), http_status (status >= 400),
stream_error (the engine sent an error event), stream_protocol (a line we cannot parse),
truncated (the stream ended before the engine said it was finished), rate_limited (still
answered 429 after the client's tries: not the engine's failure, but the request was not served),
deadline (the request ran past --request-deadline, cut and closed), over_max_tokens (the engine
streamed far past the request's max_tokens, cut and closed; loadtest/client/bounds.py states both
bounds). A stream_protocol error also names a field of the wrong type, invalid UTF-8, a line over
the line bound, or an answer that is not a stream.

`engine_flaws`: what the engine sent wrongly in a request that was still usable, in words (a
token count that is no count, so output_tokens came from chunks; a wrong Content-Type; a second
`[DONE]`); the values were ignored. Empty (and left out of requests.jsonl) for a sound answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from loadtest.results.redact import redact

__all__ = ["CLOCK_FIELDS", "ERROR_KINDS", "SESSION_ENDS", "RequestRecord", "on_clock"]

ERROR_KINDS = ("connect", "timeout", "http_status", "stream_error", "stream_protocol", "truncated",
               "rate_limited", "deadline", "over_max_tokens")
# complete: every turn sent and served; context_full: the next turn would not fit the engine's
# context (estimated before sending, or refused by the engine); failed: a turn failed
SESSION_ENDS = ("complete", "context_full", "failed")
_SESSION_FIELDS = ("session_id", "turn", "session_end", "turns_not_sent")
_REASONING_FIELDS = ("first_reasoning_ns", "last_reasoning_ns", "first_answer_ns",
                     "reasoning_chunks", "reasoning_tokens")


@dataclass
class RequestRecord:
    request_id: int
    prompt_id: str
    sent_at: float  # unix time, for humans and for joining with server logs
    sent_ns: int
    first_chunk_ns: int | None = None
    done_ns: int | None = None
    chunk_gaps_ns: list[int] = field(default_factory=list)
    output_chunks: int = 0
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    output_tokens_source: str | None = None
    finish_reason: str | None = None
    http_status: int | None = None
    error_kind: str | None = None
    error: str | None = None
    reconnects: int = 0
    rate_limited: int = 0
    rate_limited_wait_ns: int = 0
    worker: int = 0
    scheduled_ns: int | None = None  # open loop only
    cap_wait_ns: int = 0
    engine_flaws: list[str] = field(default_factory=list)
    session_id: int | None = None  # conversations only
    turn: int | None = None
    session_end: str | None = None  # on a session's last record
    turns_not_sent: int = 0
    # a reasoning stream only (loadtest/results/reasoning.py): its first and last reasoning
    # chunks, its first answer chunk after them, its reasoning chunks, the engine's count
    first_reasoning_ns: int | None = None
    last_reasoning_ns: int | None = None
    first_answer_ns: int | None = None
    reasoning_chunks: int = 0
    reasoning_tokens: int | None = None
    # a checked answer only (loadtest/workload/answers.py): "valid", or why not
    answer_check: str | None = None
    # --recount and --keep-outputs only, kept in memory (never in requests.jsonl: the output
    # text is the user's; --keep-outputs writes it apart, to outputs.jsonl)
    output_ids: list[int] | None = None
    output_text: list[str] | None = None
    tool_calls: list[dict[str, Any]] | None = None  # the answer's tool-call fragments, as streamed

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @property
    def ttft_ms(self) -> float | None:
        if self.first_chunk_ns is None:
            return None
        return (self.first_chunk_ns - self.sent_ns) / 1e6

    @property
    def e2e_ms(self) -> float | None:
        if self.done_ns is None:
            return None
        return (self.done_ns - self.sent_ns) / 1e6

    @property
    def send_lag_ms(self) -> float | None:
        return None if self.scheduled_ns is None else (self.sent_ns - self.scheduled_ns) / 1e6

    @property
    def ttft_sched_ms(self) -> float | None:
        if self.scheduled_ns is None or self.first_chunk_ns is None:
            return None
        return (self.first_chunk_ns - self.scheduled_ns) / 1e6

    @property
    def e2e_sched_ms(self) -> float | None:
        if self.scheduled_ns is None or self.done_ns is None:
            return None
        return (self.done_ns - self.scheduled_ns) / 1e6

    @property
    def context_refused(self) -> bool:
        """A conversation's turn the engine refused for its length: the session's end, not a
        failed request."""
        return self.error_kind is not None and self.session_end == "context_full"

    def fail(self, kind: str, message: str) -> "RequestRecord":
        assert kind in ERROR_KINDS, kind
        if self.error_kind is None:  # the first failure is the cause; keep it
            self.error_kind, self.error = kind, redact(message[:500])
        return self

    def to_json(self) -> dict[str, Any]:
        """The record's line in requests.jsonl (and a worker's message to the master), to be
        serialized, not changed. The fields are taken as they are, not deep-copied as
        `dataclasses.asdict` would: no field holds a dataclass or a dict, and the two lists (the
        row holds the record's own) are full once the stream is read, before the record is
        complete. asdict copied the 127 chunk gaps of a 128-token answer one by one: 112 us of
        CPU a record against 2 us (evidence/2026-11-26/measurer-cost)."""
        values = self.__dict__
        row = {name: values[name] for name in _JSON_FIELDS}
        if not self.engine_flaws:
            del row["engine_flaws"]  # sound answers: lines as before
        row["ttft_ms"] = self.ttft_ms
        row["e2e_ms"] = self.e2e_ms
        if self.scheduled_ns is not None:
            row["ttft_sched_ms"], row["e2e_sched_ms"] = self.ttft_sched_ms, self.e2e_sched_ms
        else:
            del row["scheduled_ns"], row["cap_wait_ns"]  # closed loop: lines as before
        if self.session_id is None:  # single requests: lines as before
            for name in _SESSION_FIELDS:
                del row[name]
        if not self.reasoning_chunks and self.reasoning_tokens is None:  # no reasoning: as before
            for name in _REASONING_FIELDS:
                del row[name]
        if self.answer_check is None:
            del row["answer_check"]
        return row

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> "RequestRecord":
        names = cls.__dataclass_fields__.keys()
        return cls(**{k: v for k, v in row.items() if k in names})


# to_json's fields, in the dataclass's order (the line's order); the output's ids and text are
# never in requests.jsonl
_JSON_FIELDS = tuple(f.name for f in fields(RequestRecord)
                     if f.name not in ("output_ids", "output_text", "tool_calls"))

# The record's absolute times (the others are differences): what another host's clock shifts.
CLOCK_FIELDS = ("sent_ns", "first_chunk_ns", "done_ns", "scheduled_ns", "first_reasoning_ns",
                "last_reasoning_ns", "first_answer_ns")


def on_clock(row: dict[str, Any], offset_ns: int) -> dict[str, Any]:
    """A record's JSON row with its absolute times moved by `offset_ns` (a worker's records put
    on the master's clock: loadtest/client/dispatch.py)."""
    if offset_ns:
        for name in CLOCK_FIELDS:
            if row.get(name) is not None:
                row[name] += offset_ns
    return row
