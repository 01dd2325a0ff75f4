"""Text Generation Inference's native stream: POST /generate_stream.

Quirks (engines.md): lines are `data:{...}` with no space; there is no `[DONE]`; `details`
defaults to false, so we send `details: true` to get `generated_tokens`; the last event carries
`generated_text` and `details.finish_reason`; errors come as `{"error": ..., "error_type": ...}`.
"""

from __future__ import annotations

import json
from typing import Any

from loadtest.client.protocols import (ProtocolError, StreamEvent, checked_count, checked_object,
                                      checked_text, json_object, shown, sse_data)

__all__ = ["PATHS", "TOKENS_SOURCE", "build_body", "parse_line"]

TOKENS_SOURCE = "details"
PATHS = {"generate": "/generate_stream"}


def build_body(api: str, model: str, prompt: str | list[dict[str, str]], max_tokens: int, *,
               ignore_eos: bool, temperature: float, ignore_eos_as: str = "ignore_eos",
               token_ids: bool = False, extra: dict[str, Any] | None = None) -> bytes:
    if not isinstance(prompt, str):
        raise ValueError("tgi's /generate_stream takes one text, not chat messages; use --api chat")
    if ignore_eos:
        raise ValueError("tgi's /generate_stream has no ignore_eos; drop --ignore-eos")
    if token_ids:
        raise ValueError("tgi's /generate_stream streams no token ids to recount")
    if extra:
        raise ValueError("tgi's /generate_stream takes no response_format or tools; use --api chat")
    parameters: dict[str, Any] = {"max_new_tokens": max_tokens, "details": True}
    if temperature > 0:
        parameters.update(do_sample=True, temperature=temperature)
    return json.dumps({"inputs": prompt, "parameters": parameters}).encode()


def parse_line(line: bytes) -> StreamEvent | None:
    """One event. Checked as the package docstring says: the token and the finish reason or a
    ProtocolError; details' counts or a flaw, ignored."""
    payload = sse_data(line)
    if payload is None:
        return None
    event = json_object(payload)
    if "error" in event:
        return StreamEvent(error=f"{event.get('error_type', 'error')}: {event['error']}")
    if "token" not in event:
        raise ProtocolError(f"stream event without token: {payload[:80]!r}")
    token = event["token"]
    if not isinstance(token, dict):
        raise ProtocolError(f"token is {shown(token)}, not an object")
    text = checked_text(token.get("text"), "token.text")
    if token.get("special"):
        text = None
    details = checked_object(event.get("details"), "details")
    if not details:
        return StreamEvent(output=True, text=text)
    prompt_tokens, prompt_flaw = checked_count(details.get("input_length"), "details.input_length")
    output_tokens, output_flaw = checked_count(details.get("generated_tokens"),
                                               "details.generated_tokens")
    return StreamEvent(output=True, finished=True,
                       finish_reason=checked_text(details.get("finish_reason"),
                                                  "details.finish_reason"),
                       prompt_tokens=prompt_tokens, output_tokens=output_tokens, text=text,
                       flaw=output_flaw or prompt_flaw)
