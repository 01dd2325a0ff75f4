"""Text Generation Inference's native stream: POST /generate_stream.

Quirks (engines.md): lines are `data:{...}` with no space; there is no `[DONE]`; `details`
defaults to false, so we send `details: true` to get `generated_tokens`; the last event carries
`generated_text` and `details.finish_reason`; errors come as `{"error": ..., "error_type": ...}`.
"""

from __future__ import annotations

import json
from typing import Any

from loadtest.client.protocols import ProtocolError, StreamEvent, json_object, sse_data

__all__ = ["PATHS", "TOKENS_SOURCE", "build_body", "parse_line"]

TOKENS_SOURCE = "details"
PATHS = {"generate": "/generate_stream"}


def build_body(api: str, model: str, prompt: str | list[dict[str, str]], max_tokens: int, *,
               ignore_eos: bool, temperature: float, ignore_eos_as: str = "ignore_eos",
               token_ids: bool = False) -> bytes:
    if not isinstance(prompt, str):
        raise ValueError("tgi's /generate_stream takes one text, not chat messages; use --api chat")
    if ignore_eos:
        raise ValueError("tgi's /generate_stream has no ignore_eos; drop --ignore-eos")
    if token_ids:
        raise ValueError("tgi's /generate_stream streams no token ids to recount")
    parameters: dict[str, Any] = {"max_new_tokens": max_tokens, "details": True}
    if temperature > 0:
        parameters.update(do_sample=True, temperature=temperature)
    return json.dumps({"inputs": prompt, "parameters": parameters}).encode()


def parse_line(line: bytes) -> StreamEvent | None:
    payload = sse_data(line)
    if payload is None:
        return None
    event = json_object(payload)
    if "error" in event:
        return StreamEvent(error=f"{event.get('error_type', 'error')}: {event['error']}")
    if "token" not in event:
        raise ProtocolError(f"stream event without token: {payload[:80]!r}")
    token = event["token"] if isinstance(event["token"], dict) else {}
    text = None if token.get("special") else token.get("text")
    details = event.get("details")
    if not details:
        return StreamEvent(output=True, text=text)
    return StreamEvent(output=True, finished=True, finish_reason=details.get("finish_reason"),
                       prompt_tokens=details.get("input_length"),
                       output_tokens=details.get("generated_tokens"), text=text)
