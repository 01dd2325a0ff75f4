"""API dialects: how to build a request body and read one line of the engine's stream.

Each dialect is a small module with pure functions; `DIALECTS` maps an API name to it.
`parse_line` gets one raw line exactly as it came off the socket and returns a StreamEvent,
or None for lines that carry nothing (blank separators, SSE comments, keep-alives).

An engine is input too, and may answer wrongly (a proxy in between, a half-compatible server, a
bug in a new release). Each dialect checks every field it reads, and decides per field:
- a field that says what the stream *is* (a chunk's choices, its text, the finish reason, token
  ids, TGI's token) of the wrong type is a ProtocolError naming the field: the request's output
  cannot be read, so it fails as `stream_protocol`;
- a count the engine *reports* (usage's tokens, TGI's details) that is not a non-negative
  integer within MAX_COUNT is ignored and named in the event's `flaw`: the request's timings and
  output are sound, the rig counts its chunks instead, and the run is flagged (checks,
  verdict), so a bad count never reaches a total.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

__all__ = ["MAX_COUNT", "ProtocolError", "StreamEvent", "checked_count", "checked_object",
           "checked_text", "json_object", "shown", "sse_data"]

# No engine's context holds 2^31 tokens; a count beyond it is no count.
MAX_COUNT = 2**31 - 1


class StreamEvent(NamedTuple):
    output: bool = False  # carries generated output (counts for TTFT and chunk gaps)
    finished: bool = False  # the engine said the stream is complete
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    error: str | None = None  # the engine sent an error event
    token_ids: list[int] | None = None  # this chunk's token ids, when the engine was asked for them
    text: str | None = None  # this chunk's generated text (kept with --recount, --keep-outputs)
    flaw: str | None = None  # a value the engine sent wrongly and the rig ignored (see above)
    end_marker: bool = False  # the stream's explicit end line (OpenAI's `[DONE]`)
    # A reasoning stream (loadtest/results/reasoning.py): the chunk's reasoning text, apart from
    # its answer (`text`); the count the engine reported of its reasoning tokens
    reasoning: str | None = None
    reasoning_tokens: int | None = None
    tool_calls: list[Any] | None = None  # a chat chunk's tool-call fragments, as sent


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


_decode = json.JSONDecoder().decode  # what json.loads uses, without its hooks


def json_object(payload: bytes) -> dict[str, Any]:
    try:
        if payload[:1] == b"{" and payload[1:2] != b"\0":
            # what json.loads(payload) does, less its encoding detection (once per token): a
            # payload that opens with "{" then a non-NUL byte is the UTF-8 it would detect
            parsed = _decode(payload.decode("utf-8", "surrogatepass"))
        else:
            parsed = json.loads(payload)
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"invalid UTF-8 in stream (byte {exc.start}): "
                            f"{payload[:80]!r}") from None
    except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
        raise ProtocolError(f"bad JSON in stream: {payload[:80]!r}") from None
    if not isinstance(parsed, dict):
        raise ProtocolError(f"stream event is not an object: {payload[:80]!r}")
    return parsed


def checked_count(value: Any, name: str) -> tuple[int | None, str | None]:
    """(value, None) for a token count the rig can add up; (None, why) for anything else: a
    string, a float, a bool (an int to Python, not to JSON), a negative or absurd number.
    None (the field is absent or null) is no flaw."""
    if value is None:
        return None, None
    if type(value) is int and 0 <= value <= MAX_COUNT:
        return value, None
    return None, f"{name} is {shown(value)}, not a token count"


def checked_text(value: Any, name: str) -> str | None:
    """A text field: a string or null; anything else is a ProtocolError naming the field."""
    if value is None or isinstance(value, str):
        return value
    raise ProtocolError(f"{name} is {shown(value)}, not a string")


def checked_object(value: Any, name: str) -> dict[str, Any]:
    """An object field: a dict, or {} for null/absent; anything else is a ProtocolError."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    raise ProtocolError(f"{name} is {shown(value)}, not an object")


def shown(value: Any) -> str:
    """A wrong value as a short, safe phrase for an error message: its JSON type and start."""
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)
    text = repr(value)
    return f"{kind} {text[:40]}{'...' if len(text) > 40 else ''}"
