"""What a workload is, once built: the contract between workload sources and the client.

A source (prompt set, synthetic lengths, dataset, shared prefixes, trace, conversations) is
read and checked before anything is sent; what it yields is turned into these frozen values,
bodies serialized once, so the client's hot path only writes bytes.

- Single-turn workloads: `Workload.specs`, one RequestSpec per request, sent in order.
- Trace replay: the same, plus `Workload.schedule_ns` (each request's send offset from the
  schedule's origin, ns): the open-loop schedule, exactly like --rate's.
- Conversations: `Workload.sessions`; the unit of the fixed workload is a session, whose turns
  are sent one after another by one user, each carrying the conversation so far with the
  engine's actual answers (built at run time by the client: loadtest/client/conversation.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar, overload

if TYPE_CHECKING:
    from loadtest.results.record import RequestRecord

__all__ = ["AnswerCheck", "LazySequence", "RequestSpec", "SessionSpec", "TurnSpec", "Workload",
           "WorkloadError"]


T = TypeVar("T")


class WorkloadError(ValueError):
    """A workload that cannot be built; the message is one line for the user."""


class AnswerCheck(Protocol):
    """What the client asks of a workload's answer checks (loadtest/workload/answers.py's
    AnswerChecks, which this contract does not import: the sources sit above it)."""

    def check(self, record: RequestRecord, keep_text: bool = False) -> None:
        """Set a completed record's answer_check; drop its text unless it is to be kept."""


@dataclass(frozen=True)
class RequestSpec:
    request_id: int
    prompt_id: str
    path: str
    body: bytes
    # What the source built the prompt to (token-exact sources): checked against the engine's
    # usage.prompt_tokens; None when the source does not know (plain text prompts).
    prompt_tokens: int | None = None


@dataclass(frozen=True)
class TurnSpec:
    user: str  # this turn's user message (the conversation so far is prepended at run time)
    max_tokens: int
    think_time_s: float = 0.0  # the pause before this turn is sent (0 for the first turn)
    prompt_tokens: int | None = None  # this turn's own message, in tokens, where known


@dataclass(frozen=True)
class SessionSpec:
    session_id: int
    conversation_id: str
    turns: tuple[TurnSpec, ...]
    system: str = ""  # a system message sent first in every turn, when the source has one


@dataclass(frozen=True)
class Workload:
    name: str  # short and readable: "synthetic-2048x32-256", "mixed-256x128", ...
    # A list, or for large sources a lazy Sequence that builds each body when it is taken (a
    # 100,000-request trace would not fit in memory serialized): indexing must stay O(1).
    specs: Sequence[RequestSpec]
    sha256: str  # engine-independent: the same source, seed and counts give the same hash
    schedule_ns: list[int] | None = None  # trace replay: send offsets, one per spec
    sessions: list[SessionSpec] = field(default_factory=list)
    source: str = "prompts"  # prompts | synthetic | dataset | prefix | trace | conversation | structured
    # Columns the source adds to the run's row (lengths asked, groups, turns, speedup, ...)
    columns: dict[str, object] = field(default_factory=dict)
    # The request (or, for sessions, the last turn) with the most tokens, prompt + output, where
    # the source knows its counts: (prompt_id, prompt tokens, output tokens). The context check
    # (loadtest/client/probe.py) compares it with the engine's limit without asking the engine.
    longest: tuple[str, int, int] | None = None
    # Constrained answers (structured output, tool calls): each answer's check, by prompt id
    answers: AnswerCheck | None = None
    # The LoRA adapters requests are spread over, in --lora-adapters' order (an id in a body's
    # `lora` field is a place here); () without a mix
    adapters: tuple[str, ...] = ()


class LazySequence(Sequence[T]):
    """Elements made when taken (a large source's requests, one at a time): a subclass gives its
    length and `_at(i)` for 0 <= i < len; negative indices, slices and the bounds are kept here."""

    def __len__(self) -> int:
        raise NotImplementedError

    def _at(self, index: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...

    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._at(index)
