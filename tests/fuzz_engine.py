"""A misbehaving engine for tests: a real HTTP server that answers in the wrong way it is told.

    python tests/fuzz_engine.py [--port P]

It speaks the OpenAI API (`GET /v1/models`, `POST /v1/completions`, `/v1/chat/completions`)
and TGI's native one (`GET /info`, `POST /generate_stream`), and reads what to do wrong from the
request itself: the prompt is a JSON case, so a test writes one prompt per case and each
request's record (its `prompt_id`) says which case it met. A case is {"kind": KIND, ...}:

  ok            a sound stream of max_tokens tokens (vLLM's shape: tokens, a finishing chunk,
                a usage chunk, [DONE]; TGI's: token events, details on the last)
  field         the sound stream with one field replaced: "path" (dotted, list indices as
                numbers: "usage.completion_tokens", "choices.0.text", "token.text",
                "details.generated_tokens"; "" replaces the whole event) set to "value", in
                every event of "event": "token" (each token), "final" (OpenAI's finishing chunk),
                "usage" (OpenAI's usage chunk) or "last" (TGI's last event); chat's
                opening role announcement is never replaced
  split         the sound stream written one byte at a time: every event split at every byte
  overlong      one data line of 2 MiB, then the sound stream
  endless       token events forever, max_tokens ignored
  pings         SSE comments (keep-alives) forever, no token
  trickle       SSE comments forever, one byte every 0.2 s (each read gets a byte)
  silent        the headers, then nothing
  empty         HTTP 200, an event-stream with no body
  not_stream    HTTP 200 with the whole answer as one JSON object (application/json)
  html          HTTP 200 with an HTML error page
  not_http      bytes that are no HTTP answer, then the connection closed
  bad_chunking  a stream whose chunked encoding breaks after its first event
  content_type  the sound stream under "content_type" (default application/json)
  bad_utf8      a token event whose text holds bytes that are not UTF-8
  deep_json     a data line of JSON nested 100,000 deep
  no_done       OpenAI: tokens and the finishing chunk, no usage and no [DONE]
  double_done   OpenAI: the sound stream with [DONE] twice
  after_done    OpenAI: a token event after [DONE]

Prints "listening on PORT" once it accepts connections (tests/rig_helpers.py starts it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

from aiohttp import web

KINDS = ("ok", "field", "split", "overlong", "endless", "pings", "trickle", "silent", "empty",
         "not_stream", "html", "not_http", "bad_chunking", "content_type", "bad_utf8",
         "deep_json", "no_done", "double_done", "after_done")
OPENAI_ONLY = ("no_done", "double_done", "after_done")
MODEL = "fuzz-model"
_PROMPT_TOKENS = 3


def _replaced(event: dict[str, Any], path: str, value: Any) -> Any:
    """`event` with the field at `path` set to `value` ("" : the whole event is `value`)."""
    if not path:
        return value
    *parents, last = path.split(".")
    node: Any = event
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return event


def _data(event: Any) -> bytes:
    return b"data: " + json.dumps(event).encode() + b"\n\n"


class _Stream:
    """The sound stream of one dialect, event by event, with a case's field replaced."""

    def __init__(self, case: dict[str, Any], tokens: int) -> None:
        self.case, self.tokens = case, tokens

    def _event(self, which: str, event: dict[str, Any]) -> bytes:
        if self.case.get("kind") == "field" and self.case.get("event", "token") == which:
            return _data(_replaced(event, self.case.get("path", ""), self.case.get("value")))
        return _data(event)


class _OpenAIStream(_Stream):
    def token(self, index: int) -> bytes:
        return self._event("token", {"id": "fuzz", "object": "text_completion", "model": MODEL,
                                     "choices": [{"index": 0, "text": " tok",
                                                  "finish_reason": None}], "usage": None})

    def events(self) -> Iterator[bytes]:
        for index in range(self.tokens):
            yield self.token(index)
        yield self._event("final", {"id": "fuzz", "choices": [{"index": 0, "text": "",
                                                               "finish_reason": "length"}],
                                    "usage": None})
        yield self._event("usage", {"id": "fuzz", "choices": [], "usage": {
            "prompt_tokens": _PROMPT_TOKENS, "completion_tokens": self.tokens,
            "total_tokens": _PROMPT_TOKENS + self.tokens}})
        yield b"data: [DONE]\n\n"


class _ChatStream(_OpenAIStream):
    def token(self, index: int) -> bytes:
        return self._event("token", {"id": "fuzz", "object": "chat.completion.chunk",
                                     "model": MODEL, "choices": [{"index": 0, "delta": {
                                         "content": " tok"}, "finish_reason": None}]})

    def events(self) -> Iterator[bytes]:
        yield _data({"id": "fuzz", "choices": [{"index": 0, "delta": {"role": "assistant",
                                                                     "content": ""},
                                                "finish_reason": None}]})
        for index in range(self.tokens):
            yield self.token(index)
        yield self._event("final", {"id": "fuzz", "choices": [{"index": 0, "delta": {},
                                                               "finish_reason": "length"}]})
        yield self._event("usage", {"id": "fuzz", "choices": [], "usage": {
            "prompt_tokens": _PROMPT_TOKENS, "completion_tokens": self.tokens,
            "total_tokens": _PROMPT_TOKENS + self.tokens}})
        yield b"data: [DONE]\n\n"


class _TGIStream(_Stream):
    def token(self, index: int, details: dict[str, Any] | None = None) -> bytes:
        event = {"index": index + 1, "token": {"id": index + 1, "text": " tok", "logprob": -0.5,
                                               "special": False},
                 "top_tokens": None, "generated_text": None, "details": details}
        return self._event("last" if details else "token", event)

    def events(self) -> Iterator[bytes]:
        for index in range(self.tokens - 1):
            yield self.token(index)
        yield self.token(self.tokens - 1, {"finish_reason": "length",
                                           "generated_tokens": self.tokens,
                                           "input_length": _PROMPT_TOKENS, "seed": None})


async def _answer(request: web.Request, stream: _Stream, case: dict[str, Any]
                  ) -> web.StreamResponse:
    kind = case.get("kind", "ok")
    if kind == "not_stream":
        return web.json_response({"id": "fuzz", "choices": [{"index": 0, "text": " tok" *
                                                             stream.tokens,
                                                             "finish_reason": "length"}],
                                  "usage": {"prompt_tokens": _PROMPT_TOKENS,
                                            "completion_tokens": stream.tokens}})
    if kind == "not_http":  # no status line, no headers: bytes, then the connection closed
        request.transport.write(b"hello, this is not HTTP\r\n\r\n")
        request.transport.close()
        return web.Response()  # never sent: the connection is gone
    if kind == "html":
        return web.Response(text="<html><body><h1>502 Bad Gateway</h1></body></html>\n",
                            content_type="text/html")
    response = web.StreamResponse()
    response.content_type = (case.get("content_type", "application/json")
                             if kind == "content_type" else "text/event-stream")
    await response.prepare(request)
    if kind == "bad_chunking":  # the first event as a chunk, then a chunk size that is not hex
        await response.write(next(stream.events()))
        request.transport.write(b"zz\r\ngarbage\r\n")
        await asyncio.sleep(3600)
    try:
        async for piece in _pieces(kind, stream):
            await response.write(piece)
        await response.write_eof()
    except (ConnectionError, asyncio.CancelledError):
        pass  # the rig cut the request: what it should do
    return response


async def _pieces(kind: str, stream: Any) -> AsyncIterator[bytes]:
    """What the case writes, piece by piece (each piece one write, one HTTP chunk)."""
    sound = list(stream.events())
    if kind in ("ok", "field", "content_type"):
        for event in sound:
            yield event
    elif kind == "split":
        for byte in b"".join(sound):
            yield bytes([byte])
            await asyncio.sleep(0)
    elif kind == "overlong":
        yield b"data: "
        for _ in range(32):
            yield b"x" * 65536
        yield b"\n\n" + b"".join(sound)
    elif kind == "endless":
        index = 0
        while True:
            yield stream.token(index)
            index += 1
            await asyncio.sleep(0)
    elif kind in ("pings", "trickle"):
        while True:
            for byte in b": keep-alive\n\n":
                yield bytes([byte])
                await asyncio.sleep(0.2 if kind == "trickle" else 0)
            await asyncio.sleep(0.005)
    elif kind == "silent":
        await asyncio.sleep(3600)
    elif kind == "bad_utf8":
        first = next(i for i, event in enumerate(sound) if b" tok" in event)
        for index, event in enumerate(sound):
            yield event.replace(b" tok", b" \xff\xfe tok") if index == first else event
    elif kind == "deep_json":
        yield b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n"
    elif kind == "no_done":
        for event in sound[:-2]:
            yield event
    elif kind == "double_done":
        for event in (*sound, sound[-1]):
            yield event
    elif kind == "after_done":
        for event in (*sound, stream.token(0)):
            yield event
    # "empty": nothing


async def _completions(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    case = json.loads(body["prompt"])
    return await _answer(request, _OpenAIStream(case, int(body.get("max_tokens", 16))), case)


async def _chat(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    case = json.loads(body["messages"][-1]["content"])
    return await _answer(request, _ChatStream(case, int(body.get("max_tokens", 16))), case)


async def _generate_stream(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    case = json.loads(body["inputs"])
    tokens = int(body.get("parameters", {}).get("max_new_tokens", 16))
    return await _answer(request, _TGIStream(case, tokens), case)


async def _models(_: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})


async def _info(_: web.Request) -> web.Response:
    return web.json_response({"model_id": MODEL, "version": "fuzz"})


async def _serve(port: int) -> None:
    app = web.Application()
    app.router.add_get("/v1/models", _models)
    app.router.add_post("/v1/completions", _completions)
    app.router.add_post("/v1/chat/completions", _chat)
    app.router.add_get("/info", _info)
    app.router.add_post("/generate_stream", _generate_stream)
    runner = web.AppRunner(app, access_log=None, handle_signals=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    print(f"listening on {site._server.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    logging.disable(logging.CRITICAL)  # the rig cuts answers by design: nothing to report
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    asyncio.run(_serve(parser.parse_args(argv).port))


if __name__ == "__main__":
    main()
