"""A conversation on the wire: each turn sends the conversation so far, with the engine's own
answers, so a multi-turn workload loads an engine as a chat does (a growing prompt whose
prefix the engine has seen: its prefix cache at work from turn 2 on).

The workload's unit is the session (Workload.sessions; --requests N = N sessions). A user
takes a session and sends its turns one after another: the streamed text of turn k becomes
the assistant message of turn k+1, which is sent after the turn's think time. In open loop
(--rate) a session's first turn is sent at its scheduled time and each later turn is due when
its think time ends (its record's `scheduled_ns`).

A session ends early, recorded on its last record (`session_end`, `turns_not_sent`), never as
a crash or a failed run:
- `context_full`: its next turn would not fit the engine's context (the probe's
  max_model_len). Estimated before sending, from what the engine itself reported of the last
  turn: its prompt_tokens + its answer's tokens + the next user message (its token count where
  the source knows it, else one token per 4 bytes) + _TEMPLATE_TOKENS for the chat template's
  markers + the next turn's max_tokens. An estimate, so the engine's own refusal (HTTP 400
  naming its context) ends the session the same way: that turn was sent, and is neither served
  nor failed (RequestRecord.context_refused).
- `failed`: a turn failed; the rest of the session is not sent (a conversation cannot go on
  without the answer it would carry).
A session whose turns were all served ends `complete`.

Request ids: session i's turn t (1-based) is request `first id of session i + t - 1`, the first
ids counting the turns of the sessions before it, so the same workload gives the same ids in
every run, on every process and every engine (outputs compare answer by answer).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from time import perf_counter_ns
from typing import Any

import gevent

from loadtest.client.protocols.openai import PATHS, build_body
from loadtest.results.record import RequestRecord
from loadtest.workload.spec import RequestSpec, SessionSpec, TurnSpec, WorkloadError

__all__ = ["Conversation", "Sessions", "TurnOptions", "run_session"]

# Tokens a chat template adds around the two messages a turn adds (role markers, separators,
# generation prompt): a margin for the estimate, which the engine's own 400 backs up.
_TEMPLATE_TOKENS = 16
_BYTES_PER_TOKEN = 4
# What engines say when a prompt and its max_tokens exceed the context: vLLM "maximum context
# length is N tokens", llama.cpp "exceeds the available context size", TGI "must be <= N".
_CONTEXT_REFUSAL = re.compile(r"context|max_model_len|too long|must be <=", re.IGNORECASE)


@dataclass(frozen=True)
class TurnOptions:
    """What every turn's body shares (the run's options) and the engine's context length."""
    model: str
    max_model_len: int | None = None  # prompt + output tokens per request, as the probe read it
    ignore_eos: bool = False
    temperature: float = 0.0
    ignore_eos_as: str = "ignore_eos"
    token_ids: bool = False  # --recount, --keep-outputs on the vLLM family
    keep_outputs: bool = False  # keep each answer's text on its record (--keep-outputs)


class Conversation:
    """One session as it is sent: the messages so far, the turns sent, and why it ended."""

    def __init__(self, spec: SessionSpec, first_request_id: int, options: TurnOptions) -> None:
        self.spec = spec
        self.options = options
        self.messages: list[dict[str, str]] = (
            [{"role": "system", "content": spec.system}] if spec.system else [])
        self.sent = 0  # turns sent so far
        self.end: str | None = None  # a SESSION_ENDS reason, once ended
        self._first_id = first_request_id
        self._last: RequestRecord | None = None

    def next_request(self) -> RequestSpec | None:
        """The next turn's request, with the conversation so far; None once the session has
        ended (all turns served, the next one would not fit, or a turn failed)."""
        if self.end is None and self.sent == len(self.spec.turns):
            self._end("complete")
        elif self.end is None and not self._fits(self.spec.turns[self.sent]):
            self._end("context_full")
        if self.end is not None:
            return None
        turn = self.spec.turns[self.sent]
        o = self.options
        body = build_body("chat", o.model, [*self.messages, {"role": "user", "content": turn.user}],
                          turn.max_tokens, ignore_eos=o.ignore_eos, temperature=o.temperature,
                          ignore_eos_as=o.ignore_eos_as, token_ids=o.token_ids)
        # prompt_tokens stays unknown: the prompt is the whole conversation, answers included
        return RequestSpec(self._first_id + self.sent, f"{self.spec.conversation_id}:{self.sent + 1}",
                           PATHS["chat"], body)

    def think_time_s(self) -> float:
        """The pause before the next turn (none before the first)."""
        if not self.sent or self.sent >= len(self.spec.turns):
            return 0.0
        return self.spec.turns[self.sent].think_time_s

    def answered(self, record: RequestRecord) -> None:
        """Take the sent turn's record: its answer joins the conversation, or the session ends."""
        turn = self.spec.turns[self.sent]
        self.sent += 1
        record.session_id, record.turn = self.spec.session_id, self.sent
        self._last = record
        if not record.ok:
            self._end("context_full" if _refused_for_context(record) else "failed")
            return
        answer = "".join(record.output_text or ())
        self.messages += [{"role": "user", "content": turn.user},
                          {"role": "assistant", "content": answer}]
        if not self.options.keep_outputs and record.output_ids is None:
            record.output_text = None  # carried in the messages now; --recount keeps ids + text

    def _fits(self, turn: TurnSpec) -> bool:
        """Whether the next turn fits the engine's context, estimated from the last turn's
        reported prompt and answer; True when there is nothing to estimate from."""
        last, limit = self._last, self.options.max_model_len
        if limit is None or last is None or last.prompt_tokens is None:
            return True
        message = (turn.prompt_tokens if turn.prompt_tokens is not None
                   else len(turn.user.encode()) // _BYTES_PER_TOKEN + 1)
        needed = (last.prompt_tokens + (last.output_tokens or 0) + message + _TEMPLATE_TOKENS
                  + turn.max_tokens)
        return needed <= limit

    def _end(self, reason: str) -> None:
        self.end = reason
        if self._last is not None:
            self._last.session_end = reason
            self._last.turns_not_sent = len(self.spec.turns) - self.sent


def _refused_for_context(record: RequestRecord) -> bool:
    return record.http_status == 400 and bool(_CONTEXT_REFUSAL.search(record.error or ""))


class Sessions(Sequence[Conversation]):
    """The workload's sessions as the dispatcher hands them out: item i is a fresh Conversation
    of session i, its turns numbered from their fixed first request id."""

    def __init__(self, sessions: Sequence[SessionSpec], options: TurnOptions, api: str) -> None:
        if api != "chat":
            raise WorkloadError(f"a conversation workload is sent over the chat API: pass --api "
                                f"chat (not {api!r})")
        for index, session in enumerate(sessions):
            if not session.turns:
                raise WorkloadError(f"conversation {session.conversation_id!r} has no turns")
            if session.session_id != index:  # the dispatcher's queue ids are the session ids
                raise WorkloadError(f"session {index} is numbered {session.session_id}; a "
                                    "workload numbers its sessions 0, 1, 2, ... in order")
        self.sessions = sessions
        self.options = options
        self._first_ids = list(accumulate((len(s.turns) for s in sessions), initial=0))

    def __len__(self) -> int:
        return len(self.sessions)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return Conversation(self.sessions[index], self._first_ids[index], self.options)

    @property
    def turns(self) -> int:
        return self._first_ids[-1]


def run_session(conversation: Conversation, send: Callable[[RequestSpec], RequestRecord],
                account: Callable[[RequestRecord, bool], None], *, open_loop: bool,
                sleep: Callable[[float], Any] = gevent.sleep) -> None:
    """Send a session's turns one after another. Each record is handed to `account` with
    whether it is the session's last, once the next turn is built (the last record carries
    the session's end); the next turn is sent after its think time. In open loop a later turn
    is due when its think time ends, and its record says so (`scheduled_ns`); the first turn's
    scheduled time is the dispatcher's."""
    spec = conversation.next_request()
    while spec is not None:
        due_ns = perf_counter_ns()
        record = send(spec)
        if open_loop and conversation.sent:
            record.scheduled_ns = due_ns
        conversation.answered(record)
        spec = conversation.next_request()
        account(record, spec is None)
        if spec is not None and (think_s := conversation.think_time_s()) > 0:
            sleep(think_s)
