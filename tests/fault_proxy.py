"""A fault-injecting reverse proxy for tests: forwards to a real engine and breaks chosen answers.

    python tests/fault_proxy.py --upstream URL [--port P] --faults ok,http500,... [--stall-s S]
        [--slow-s S]

Each streamed request (a POST to a path ending in /completions) takes the next fault of the
cycle, in the order requests arrive:
  ok          forwarded as is
  http500     HTTP 500 with an OpenAI-style error body (the engine is not asked)
  http503     HTTP 503 "model is loading", as an engine's front end answers before it is ready
  http429     HTTP 429 with Retry-After: 1
  bad_json    the engine's first 3 chunks, then a data line that is not JSON, then the end
  no_final    the engine's stream without its last chunks (finish, usage, [DONE]), ended cleanly
  reset       the engine's first 3 chunks, then a TCP reset
  stall       the engine's first 2 chunks, then silence for --stall-s seconds
  slow_first  the first chunk held back --slow-s seconds, then the rest as is
  miscount    the stream as is, but its usage reports one output token more than were sent
  buffer      the whole answer held back and sent in one piece at its end (a buffering proxy)
Anything else (/v1/models, /health, /metrics) is forwarded untouched. Prints "listening on PORT"
once it accepts connections.

As a hosted endpoint's stand-in: `GET /fault-proxy/counts` answers how many streamed requests
arrived and how many of them were answered 429, and with --key-env NAME every request without
`Authorization: Bearer $NAME` is answered 401 (as OpenAI's API does).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import socket
import struct
from typing import Any

import aiohttp
from aiohttp import web

FAULTS = ("ok", "http500", "http503", "http429", "bad_json", "no_final", "reset", "stall",
          "slow_first", "miscount", "buffer")
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


def _is_last(line: bytes) -> bool:
    """A chunk that finishes the stream: a finish_reason, the usage chunk, or [DONE]."""
    data = line[len(b"data:"):].strip()
    if data == b"[DONE]":
        return True
    try:
        event = json.loads(data)
    except ValueError:
        return False
    choices = event.get("choices") or []
    return bool(event.get("usage")) or any(c.get("finish_reason") for c in choices)


class FaultProxy:
    def __init__(self, upstream: str, faults: list[str], stall_s: float, slow_s: float,
                 key: str | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.faults = itertools.cycle(faults)
        self.stall_s = stall_s
        self.slow_s = slow_s
        self.key = key
        self.counts = {"requests": 0, "429": 0}
        self.session: aiohttp.ClientSession | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if request.path == "/fault-proxy/counts":
            return web.json_response(self.counts)
        if self.key and request.headers.get("Authorization") != f"Bearer {self.key}":
            return web.json_response({"error": {"message": "Incorrect API key provided"}},
                                     status=401)
        if request.method == "POST" and request.path.endswith("/completions"):
            self.counts["requests"] += 1
            return await self._faulted(request, body, next(self.faults))
        return await self._forward(request, body)

    async def _forward(self, request: web.Request, body: bytes) -> web.Response:
        async with self.session.request(request.method, self.upstream + request.path_qs,
                                        data=body, headers=_headers(request)) as upstream:
            return web.Response(status=upstream.status, body=await upstream.read(),
                                content_type=upstream.content_type)

    async def _faulted(self, request: web.Request, body: bytes, fault: str) -> web.StreamResponse:
        if fault == "http500":
            return web.json_response({"error": {"message": "injected server error"}}, status=500)
        if fault == "http503":
            return web.json_response({"error": "Model is loading"}, status=503)
        if fault == "http429":
            self.counts["429"] += 1
            return web.json_response({"error": {"message": "rate limited"}}, status=429,
                                     headers={"Retry-After": "1"})
        async with self.session.post(self.upstream + request.path_qs, data=body,
                                     headers=_headers(request)) as upstream:
            response = web.StreamResponse(status=upstream.status)
            response.content_type = upstream.content_type
            await response.prepare(request)
            chunks = 0
            held: list[bytes] = []
            async for line in upstream.content:
                is_data = line.startswith(b"data:")
                if is_data and fault == "no_final" and _is_last(line):
                    break
                if is_data and fault == "slow_first" and chunks == 0:
                    await asyncio.sleep(self.slow_s)
                if is_data and fault == "stall" and chunks == 2:
                    await asyncio.sleep(self.stall_s)
                    return response
                if is_data and fault in ("bad_json", "reset") and chunks == 3:
                    if fault == "reset":
                        _reset(request)
                        return response
                    await response.write(b"data: {\"choices\": [{\"text\": \n\n")
                    break
                if is_data and fault == "miscount" and b'"completion_tokens"' in line:
                    line = _miscounted(line)
                chunks += is_data
                if fault == "buffer":
                    held.append(line)
                else:
                    await response.write(line)
            await response.write(b"".join(held))
            await response.write_eof()
            return response


def _miscounted(line: bytes) -> bytes:
    event = json.loads(line[len(b"data:"):])
    event["usage"]["completion_tokens"] += 1
    return b"data: " + json.dumps(event).encode() + b"\n"


def _headers(request: web.Request) -> dict[str, str]:
    return {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}


def _reset(request: web.Request) -> None:
    """Close the client's connection with a TCP reset (SO_LINGER 0), not a clean FIN."""
    sock = request.transport.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    request.transport.abort()


async def _serve(args: argparse.Namespace) -> None:
    proxy = FaultProxy(args.upstream, args.faults.split(","), args.stall_s, args.slow_s,
                       os.environ.get(args.key_env) if args.key_env else None)
    proxy.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy.handle)
    runner = web.AppRunner(app, access_log=None, handle_signals=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # the port chosen when --port is 0
    print(f"listening on {port}", flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--faults", required=True, help=", ".join(FAULTS))
    parser.add_argument("--stall-s", type=float, default=30.0)
    parser.add_argument("--slow-s", type=float, default=2.0)
    parser.add_argument("--key-env", default="", help="require this variable's key as Bearer")
    args: Any = parser.parse_args(argv)
    unknown = set(args.faults.split(",")) - set(FAULTS)
    if unknown:
        parser.error(f"unknown faults: {', '.join(sorted(unknown))}")
    asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
