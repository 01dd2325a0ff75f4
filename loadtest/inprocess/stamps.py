"""What every adapter shares: a request's timestamps, and the refusal when an engine is missing.

Standard library only: imported inside each engine's venv by loadtest/inprocess/worker.py.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["Missing", "Stamps"]


class Missing(RuntimeError):
    """The engine's library or model is not installed here; the message names the install step."""


class Stamps:
    """One request's timestamps, taken as the engine hands over each output event."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request
        self.sent_at = time.time()
        self.sent_ns = time.perf_counter_ns()
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.gaps: list[int] = []
        self.chunks = 0

    def output(self, now_ns: int | None = None) -> None:
        """An output event (one or more new tokens) arrived now."""
        now = time.perf_counter_ns() if now_ns is None else now_ns
        if self.first_ns is None:
            self.first_ns = now
        else:
            self.gaps.append(now - (self.last_ns or now))
        self.last_ns = now
        self.chunks += 1

    def record(self, *, done_ns: int, prompt_tokens: int | None, output_tokens: int | None,
               finish_reason: str | None, streamed: bool = True,
               error: str | None = None) -> dict[str, Any]:
        """The request's record. `streamed` False: the engine returned the answer whole, so
        there is no first-token time (TTFT unknown, not guessed)."""
        row: dict[str, Any] = {
            "request_id": self.request["request_id"], "prompt_id": self.request["prompt_id"],
            "sent_at": self.sent_at, "sent_ns": self.sent_ns,
            "first_chunk_ns": self.first_ns if streamed else None, "done_ns": done_ns,
            "chunk_gaps_ns": self.gaps if streamed else [],
            "output_chunks": self.chunks if streamed else (1 if output_tokens else 0),
            "prompt_tokens": prompt_tokens, "output_tokens": output_tokens,
            "output_tokens_source": "engine" if output_tokens is not None else None,
            "finish_reason": finish_reason,
        }
        if error is not None:
            row["error_kind"], row["error"] = "stream_error", error[:500]
        return row
