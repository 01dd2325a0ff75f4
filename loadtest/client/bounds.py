"""Bounds the rig holds every request to, whatever the engine sends: each request ends.

An engine is input too. Some wrong answers never end on their own: a stream that ignores
max_tokens, keep-alive comments forever, bytes trickled slower than the read timeout (each read
gets a byte, so --read-timeout never fires). These bounds end them, and each says so in the
request's record (loadtest/client/transport.py enforces them):

- output: a request that streams more than OUTPUT_MARGIN x its max_tokens + OUTPUT_SLACK output
  chunks is cut and closed (`over_max_tokens`). A chunk carries at least one token, so an engine
  that keeps to max_tokens sends at most max_tokens of them; twice that is far past it. A
  reported token count above the same limit is no count (a flaw, ignored).
- deadline: --request-deadline S, the longest one request may take from its send to its last
  byte (`deadline`), checked as each line arrives and by a gevent timer, so a server that sends
  nothing, or a byte now and then, is cut on time too. Default, per request: --read-timeout
  (the longest silence the run allows: a queue, a prefill) plus DEADLINE_S_PER_TOKEN for each
  token the request asks for, a pace far slower than any serving engine's.
- line: a line longer than MAX_LINE_BYTES is a protocol failure (`stream_protocol`), read no
  further. The longest real line, TGI's last event with the whole answer in it, is a few KiB per
  thousand tokens.

What the engine sent wrongly in a request that was still usable (a bad token count, a wrong
Content-Type, a second `[DONE]`) is kept in the record's `engine_flaws`; `flaw_columns` counts
those requests for the run's row, and the verdict and warnings name them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loadtest.client.options import ConfigError
from loadtest.results.record import RequestRecord

__all__ = ["Bounds", "MAX_LINE_BYTES", "OUTPUT_MARGIN", "OUTPUT_SLACK", "add_bounds_options",
           "bounds_columns", "flaw_columns", "output_limit", "parse_request_deadline",
           "requested_tokens", "run_bounds"]

OUTPUT_MARGIN = 2
OUTPUT_SLACK = 16
MAX_LINE_BYTES = 1 << 20
DEADLINE_S_PER_TOKEN = 1.0
_UNSTATED_TOKENS = 4096  # a body that names no length (never the rig's own): a long answer
_FLAWS_SHOWN = 3


@dataclass(frozen=True)
class Bounds:
    deadline_s: float | None = None  # --request-deadline; None: sized per request, as above
    read_timeout_s: float = 600.0
    max_line_bytes: int = MAX_LINE_BYTES

    def for_request(self, body: bytes) -> tuple[float, int | None]:
        """(deadline in seconds, most output chunks) for a request with this body; no output
        bound when the body asks for no length (the engine's own limit applies)."""
        max_tokens = requested_tokens(body)
        deadline_s = self.deadline_s
        if deadline_s is None:
            deadline_s = self.read_timeout_s + DEADLINE_S_PER_TOKEN * (max_tokens or
                                                                      _UNSTATED_TOKENS)
        return deadline_s, None if max_tokens is None else output_limit(max_tokens)


def output_limit(max_tokens: int) -> int:
    """The most output chunks (and reported output tokens) a request for max_tokens may send."""
    return OUTPUT_MARGIN * max_tokens + OUTPUT_SLACK


_MAX_TOKENS = re.compile(rb'"max_(?:new_)?tokens":\s*(\d+)')


def requested_tokens(body: bytes) -> int | None:
    """The output length a request body asks for: OpenAI's `max_tokens`, TGI's
    `parameters.max_new_tokens`. The body is the rig's own JSON (the dialects build it), where
    a prompt's quotes are escaped, so the first match is the field; a search, not a parse,
    because conversation turns carry their whole history and a parse per request costs."""
    found = _MAX_TOKENS.search(body)
    return int(found.group(1)) if found and int(found.group(1)) > 0 else None


def add_bounds_options(parser: Any) -> None:
    parser.add_argument_group("llm-load-rig: request bounds").add_argument(
        "--request-deadline", type=str, default="",
        help="seconds one request may take from its send to its last byte before it is cut and "
             "recorded as `deadline` (default: --read-timeout + 1 s per output token the "
             "request asks for)")


def parse_request_deadline(options: Any) -> float | None:
    """--request-deadline in seconds, None for the default; ConfigError (one line) for a bad one."""
    value = str(getattr(options, "request_deadline", "") or "").strip()
    if not value:
        return None
    try:
        deadline_s = float(value)
    except ValueError:
        raise ConfigError(f"--request-deadline must be a number of seconds, got {value!r}") from None
    if not 0.001 <= deadline_s <= 1e9:  # also refuses nan and inf
        raise ConfigError(f"--request-deadline must be between 0.001 and 1e9 seconds, "
                          f"got {value!r}")
    return deadline_s


def run_bounds(deadline_s: float | None, read_timeout_s: float) -> Bounds:
    """The run's Bounds: the deadline given, or each request's sized from it."""
    return Bounds(deadline_s=deadline_s, read_timeout_s=read_timeout_s)


def bounds_columns(bounds: Bounds, max_tokens: int) -> dict[str, Any]:
    """The run row's record of its deadline: the one given, or the default for --max-tokens
    (a prompt or dataset item with a length of its own gets its own default)."""
    deadline_s, _ = bounds.for_request(b'"max_tokens": %d' % max_tokens)
    return {"request_deadline_s": deadline_s}


def flaw_columns(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """`flawed_requests`: completed requests the engine answered with values the rig ignored
    (a failed one is counted as failed, its error says what went wrong); `engine_flaws`: the
    first few distinct of those values, said in words."""
    flawed = [r for r in records if r.engine_flaws and r.ok]
    seen: dict[str, None] = {}
    for record in flawed:
        for flaw in record.engine_flaws:
            seen.setdefault(flaw)
        if len(seen) >= _FLAWS_SHOWN:
            break
    return {"flawed_requests": len(flawed), "engine_flaws": "; ".join(list(seen)[:_FLAWS_SHOWN])}
