"""OpenAI-compatible completions and chat streams (vLLM, Aphrodite, SGLang, llama.cpp,
text-generation-webui, TGI's Messages API, hosted endpoints).

Stream: `data: {chunk}` lines ending with `data: [DONE]`. We always send
`stream_options.include_usage`, so one last chunk with `choices: []` carries `usage`
(text-generation-webui sends `usage: null` on the finishing chunk first: tolerated).
transformers serve sends no `[DONE]`: its last chunk carries both the finish reason and
`usage`, and such a chunk ends the stream too.
"""

from __future__ import annotations

import json
from typing import Any

from loadtest.client.protocols import (ProtocolError, StreamEvent, checked_count, checked_object,
                                      checked_text, json_object, shown, sse_data)

__all__ = ["PATHS", "TOKENS_SOURCE", "build_body", "parse_line"]

TOKENS_SOURCE = "usage"
PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
_DONE = StreamEvent(finished=True, end_marker=True)


def build_body(api: str, model: str, prompt: str | list[dict[str, str]], max_tokens: int, *,
               ignore_eos: bool, temperature: float, ignore_eos_as: str = "ignore_eos",
               token_ids: bool = False, extra: dict[str, Any] | None = None) -> bytes:
    """`prompt` is a text, or for --api chat the whole message list (system prompt, earlier
    turns with the engine's own answers, this turn's user message)."""
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "stream": True,
                            "stream_options": {"include_usage": True},
                            "temperature": temperature}
    if api == "chat":
        body["messages"] = ([{"role": "user", "content": prompt}] if isinstance(prompt, str)
                            else prompt)
    elif isinstance(prompt, str):
        body["prompt"] = prompt
    else:
        raise ValueError("a workload of chat messages needs --api chat")
    if ignore_eos and ignore_eos_as == "generation_config":
        # transformers serve: a per-request GenerationConfig (it replaces the model's own) whose
        # EOS id -1 matches no token, so generation stops only at max_tokens.
        body["generation_config"] = json.dumps({"eos_token_id": -1, "do_sample": temperature > 0})
    elif ignore_eos and ignore_eos_as == "ban_eos_token":
        body["ban_eos_token"] = True  # text-generation-webui's name for it
    elif ignore_eos:
        body["ignore_eos"] = True  # vLLM-family extension: fixed output length
    if token_ids:
        body["return_token_ids"] = True  # vLLM: each chunk carries its tokens' ids (--recount)
    if extra:  # a constrained answer's fields (response_format, tools, ...)
        body.update(extra)
    return json.dumps(body).encode()


def parse_line(line: bytes, empty_chunk_is_token: bool = True) -> StreamEvent | None:
    """One line of the stream. Checked as the package docstring says: the chunk's shape (choices,
    text, finish reason, token ids) or a ProtocolError; usage's counts or a flaw, ignored.
    ``empty_chunk_is_token``: the target's (servers/spec.py Target)."""
    payload = sse_data(line)
    if payload is None:
        return None
    if payload == b"[DONE]":
        return _DONE
    chunk = json_object(payload)
    if "error" in chunk:
        return StreamEvent(error=_error_text(chunk["error"]))
    # Once per streamed token: the common shapes are checked inline (exact types, as JSON gives
    # them), anything else goes through the checks that name what is wrong.
    usage = chunk.get("usage")
    reasoning_tokens = None
    if usage is None:  # every chunk but the last
        prompt_tokens = output_tokens = flaw = None
        counted = False
    elif isinstance(usage, dict):
        prompt_tokens, prompt_flaw = checked_count(usage.get("prompt_tokens"), "usage.prompt_tokens")
        output_tokens, output_flaw = checked_count(usage.get("completion_tokens"),
                                                   "usage.completion_tokens")
        reasoning_tokens, reasoning_flaw = _reasoning_tokens(usage)
        flaw = output_flaw or prompt_flaw or reasoning_flaw
        counted = "completion_tokens" in usage
    else:  # a report, not the stream itself: ignored, flagged
        prompt_tokens = output_tokens = None
        flaw, counted = f"usage is {shown(usage)}, not an object", False
    choices = chunk.get("choices")
    if choices is None:
        choices = ()
    elif type(choices) is not list:
        raise ProtocolError(f"choices is {shown(choices)}, not a list")
    output, finish_reason, ids, text = False, None, None, None
    reasoning = tools = None
    for choice in choices:
        if type(choice) is not dict:
            raise ProtocolError(f"a choice is {shown(choice)}, not an object")
        if "text" in choice:  # a completion
            choice_text = choice["text"]
            if type(choice_text) is not str:
                choice_text = checked_text(choice_text, "choices[].text")
        else:  # a chat delta: its answer text (content), read first
            delta = choice.get("delta")
            if type(delta) is not dict:
                delta = checked_object(delta, "choices[].delta")
            choice_text = delta.get("content")
            if choice_text is not None and type(choice_text) is not str:
                checked_text(choice_text, "choices[].delta.content")  # raises
            # Only a delta that is not one plain content (one key) can hold more: the role
            # announcement, reasoning, tool calls. Plain content, once per token, skips this.
            if len(delta) > 1 or not choice_text:
                if "role" in delta and not choice_text:
                    choice_text = None
                reasoning = _reasoning_text(delta) or reasoning
                tools = _tool_calls(delta) or tools
        reason = choice.get("finish_reason")
        if reason is not None and type(reason) is not str:
            checked_text(reason, "finish_reason")  # raises, naming the field
        # A generated token arrived, even one whose text is still empty (a byte-level token that
        # is part of a multi-byte character decodes to "" until the character is complete). Not
        # a token: chat's opening role announcement, a closing chunk with only the finish reason.
        if choice_text or (empty_chunk_is_token and choice_text == "" and reason is None):
            output, text = True, choice_text
        elif reasoning or tools:
            output = True
        finish_reason = reason or finish_reason
        if choice.get("token_ids") is not None:  # only when asked (--recount, --keep-outputs)
            ids, text = _token_ids(choice["token_ids"]), choice_text or ""
    if reasoning is None and tools is None and reasoning_tokens is None:
        return StreamEvent(output, finish_reason is not None and counted, finish_reason,
                           prompt_tokens, output_tokens, None, ids, text, flaw)
    return StreamEvent(output, finish_reason is not None and counted, finish_reason,
                       prompt_tokens, output_tokens, None, ids, text, flaw,
                       reasoning=reasoning, reasoning_tokens=reasoning_tokens, tool_calls=tools)


# Where engines stream a chat answer's reasoning: vLLM's `reasoning` (its `reasoning_content`
# before 0.11), SGLang's and llama.cpp's (--reasoning-format deepseek) `reasoning_content`.
_REASONING_FIELDS = ("reasoning_content", "reasoning")


def _reasoning_text(delta: dict[str, Any]) -> str | None:
    for name in _REASONING_FIELDS:
        value = delta.get(name)
        if value:
            return value if type(value) is str else checked_text(value, f"choices[].delta.{name}")
    return None


def _tool_calls(delta: dict[str, Any]) -> list[Any] | None:
    """A delta's tool-call fragments (OpenAI: index, id, function name, argument text pieces)."""
    calls = delta.get("tool_calls")
    if not calls:
        return None
    if type(calls) is not list or not all(type(call) is dict for call in calls):
        raise ProtocolError(f"tool_calls is {shown(calls)}, not a list of objects")
    return calls


def _reasoning_tokens(usage: dict[str, Any]) -> tuple[int | None, str | None]:
    """usage.completion_tokens_details.reasoning_tokens (OpenAI's field; vLLM's with a reasoning
    parser), or a flaw when it is there but no count."""
    details = usage.get("completion_tokens_details")
    if details is None:
        return None, None
    if type(details) is not dict:
        return None, f"usage.completion_tokens_details is {shown(details)}, not an object"
    return checked_count(details.get("reasoning_tokens"),
                         "usage.completion_tokens_details.reasoning_tokens")


def _token_ids(ids: Any) -> list[int]:
    """A chunk's token ids (--recount reads them back): a list of non-negative integers."""
    if not isinstance(ids, list) or not all(type(i) is int and i >= 0 for i in ids):
        raise ProtocolError(f"token_ids is not a list of token ids: {str(ids)[:80]}")
    return ids


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)
