"""API dialects: how to build a request body and read one line of the engine's stream.

Each dialect is a small module with pure functions; `DIALECTS` maps an API name to it.
`parse_line` gets one raw line exactly as it came off the socket and returns a StreamEvent,
or None for lines that carry nothing (blank separators, SSE comments, keep-alives).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

__all__ = ["StreamEvent", "ProtocolError", "sse_data", "json_object"]


class StreamEvent(NamedTuple):
    output: bool = False  # carries generated output (counts for TTFT and chunk gaps)
    finished: bool = False  # the engine said the stream is complete
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    error: str | None = None  # the engine sent an error event
    token_ids: list[int] | None = None  # this chunk's token ids, when the engine was asked for them
    text: str | None = None  # this chunk's generated text (kept with --recount, --keep-outputs)


class ProtocolError(ValueError):
    """A line that is not what the dialect says it must be."""


def sse_data(line: bytes) -> bytes | None:
    """The payload of an SSE `data:` line ("data:" with or without one space), or None for a
    line that carries nothing (blank, comment, other SSE fields, empty data)."""
    if not line.startswith(b"data:"):
        stripped = line.strip()
        if not stripped or stripped.startswith(b":"):
            return None  # event separator or comment (keep-alive ping)
        if stripped.startswith((b"event:", b"id:", b"retry:")):
            return None
        raise ProtocolError(f"not an SSE line: {line[:80]!r}")
    payload = line[5:]
    if payload.startswith(b" "):
        payload = payload[1:]
    return payload.rstrip(b"\r\n") or None


def json_object(payload: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(payload)
    except ValueError as exc:
        raise ProtocolError(f"bad JSON in stream: {payload[:80]!r}") from exc
    if not isinstance(parsed, dict):
        raise ProtocolError(f"stream event is not an object: {payload[:80]!r}")
    return parsed
