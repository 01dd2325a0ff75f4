"""A pacing server: streams tokens on an exact, known schedule and measures its own lateness.

    python -m loadtest.calibration.pacer --port 8100 [--ttft-ms 50 --gap-ms 20 --tokens 64]
                                         [--workers N] [--loop auto|uvloop|asyncio]

It speaks the three streams the rig reads, as real engines send them (HTTP/1.1 keep-alive,
chunked, TCP_NODELAY, one SSE event per HTTP chunk):
- POST /v1/completions and /v1/chat/completions: `data: {...}` chunks as vLLM sends them (chat
  opens with a role-only delta), the last token with finish_reason "length", then, when
  stream_options.include_usage is set, a chunk with `choices: []` and `usage`, then `data: [DONE]`;
- POST /generate_stream: TGI's native stream (`data:{...}`, no space, no [DONE]; `details` on
  the last event when the request asked for them);
- GET /v1/models, /version, /info, /health: what the rig's probe asks.

Schedule, per request: token k (1..n) is written at read + ttft + (k-1) x gap, where `read` is
when the request's last byte was read and n is the request's max_tokens (TGI: max_new_tokens),
or --tokens when it names none. Deadlines are absolute, so nothing drifts. One timer serves
every stream (a heap of deadlines); since epoll and libuv wake only to the millisecond, the loop
wakes --spin-us early and then polls its sockets (still serving them) until the deadline.

Every token's write is stamped (perf_counter_ns: CLOCK_MONOTONIC, the rig's clock) as its
bytes are handed to the socket (so a pacer preempted mid-write is late, not the client):
- GET /lateness: counts and p50/p99/max of lateness (write minus deadline, every token), of the
  first token's alone, of the gap error (actual gap minus --gap-ms), and of the write calls;
- GET /requests: every finished request's prompt, read time and token write times, so that a
  calibration can subtract the server's own timing from what the client measured, exactly;
- POST /lateness/reset: forget both.
With --workers N > 1, N processes share the port (SO_REUSEPORT) and those three are served,
summed over the workers, on --control-port (default: port + 1).
Standard library only (uvloop when installed), so it runs wherever python3 does.
"""

from __future__ import annotations

import asyncio
import ctypes
import heapq
import json
import math
import os
import secrets
import signal
import socket
import sys
import time
from array import array
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

from loadtest.toolkit.args import RigParser
from loadtest.toolkit.types import non_negative_number, port, positive_int

__all__ = ["Settings", "Stats", "summarize_lateness", "serve", "main"]

MODEL = "pacer"
VERSION = "pacer-1"
_MAX_LOGGED_REQUESTS = 200_000  # per worker; later ones are counted, not kept
_MAX_HEAD_BYTES = 64 * 1024
_STREAM_PATHS = {"/v1/completions": "completions", "/v1/chat/completions": "chat",
                 "/generate_stream": "generate"}
_CONTROL_PATHS = {("GET", "/lateness"), ("GET", "/requests"), ("POST", "/lateness/reset")}
_SSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
             b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\nserver: pacer\r\n\r\n")
_END = b"0\r\n\r\n"


@dataclass(frozen=True)
class Settings:
    ttft_ns: int
    gap_ns: int
    tokens: int
    spin_ns: int


class Stats:
    """What this process wrote and how late: raw values, summarized on request."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.lateness = array("q")  # ns, every token: write stamp minus deadline
        self.first = array("q")  # ns, first tokens only
        self.gap_error = array("q")  # ns, (write k - write k-1) - gap
        self.write_call = array("q")  # ns, how long each write call took
        self.requests: list[tuple[str, int, list[int]]] = []  # (prompt key, read_ns, write_ns)
        self.requests_done = 0
        self.aborted = 0  # client went away mid-stream
        self.buffered_writes = 0  # writes that found earlier bytes still queued in user space

    def raw(self) -> dict[str, Any]:
        return {"lateness": self.lateness, "first": self.first, "gap_error": self.gap_error,
                "write_call": self.write_call,
                "requests": self.requests, "requests_done": self.requests_done,
                "aborted": self.aborted, "buffered_writes": self.buffered_writes}


def summarize_lateness(raws: list[dict[str, Any]], in_flight: int = 0) -> dict[str, Any]:
    """The /lateness answer from one or more workers' raw stats."""
    def merged(key: str) -> list[int]:
        values: list[int] = []
        for raw in raws:
            values.extend(raw[key])
        return values

    return {"requests": sum(r["requests_done"] for r in raws), "in_flight": in_flight,
            "aborted": sum(r["aborted"] for r in raws),
            "buffered_writes": sum(r["buffered_writes"] for r in raws),
            "lateness_ms": _distribution(merged("lateness")),
            "first_token_lateness_ms": _distribution(merged("first")),
            "gap_error_ms": _distribution(merged("gap_error")),
            "write_call_ms": _distribution(merged("write_call"))}


def _distribution(values_ns: list[int]) -> dict[str, Any]:
    if not values_ns:
        return {"count": 0, "p50": None, "p99": None, "max": None, "min": None, "mean": None}
    ordered = sorted(values_ns)
    return {"count": len(ordered), "p50": _percentile(ordered, 50) / 1e6,
            "p99": _percentile(ordered, 99) / 1e6, "max": ordered[-1] / 1e6,
            "min": ordered[0] / 1e6, "mean": sum(ordered) / len(ordered) / 1e6}


def _percentile(ordered: list[int], q: float) -> float:
    """numpy's default (linear interpolation between the two nearest ranks)."""
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _sse(event: dict[str, Any], space: bool = True) -> bytes:
    return _frame((b"data: " if space else b"data:") + json.dumps(event, separators=(",", ":")).encode()
                  + b"\n\n")


class _Stream:
    """One request's answer: its schedule, its bytes, its write stamps."""

    __slots__ = ("conn", "api", "key", "read_ns", "n", "k", "last_write", "writes", "mid",
                 "request", "prompt_tokens", "chat_opened", "cid", "created")

    def __init__(self, conn: "_Connection", api: str, request: dict[str, Any], key: str,
                 n: int, read_ns: int) -> None:
        self.conn, self.api, self.request, self.key, self.n = conn, api, request, key, n
        self.read_ns = read_ns
        self.k = 1
        self.last_write = 0
        self.writes: list[int] = []
        self.prompt_tokens = len(key.split())
        self.cid = secrets.token_hex(8)
        self.created = int(time.time())
        self.chat_opened = False
        self.mid = self._openai_chunk(None) if api != "generate" else b""

    def _openai_chunk(self, finish: str | None) -> bytes:
        if self.api == "chat":
            choice = {"index": 0, "delta": {"content": " tok"}, "logprobs": None,
                      "finish_reason": finish}
            head = {"id": f"chatcmpl-{self.cid}", "object": "chat.completion.chunk"}
        else:
            choice = {"index": 0, "text": " tok", "logprobs": None, "finish_reason": finish,
                      "stop_reason": None}
            head = {"id": f"cmpl-{self.cid}", "object": "text_completion"}
        return _sse({**head, "created": self.created, "model": MODEL, "choices": [choice]})

    def token_bytes(self) -> bytes:
        k, n = self.k, self.n
        if self.api == "generate":
            return self._tgi_event(k, k == n) + (_END if k == n else b"")
        out = b""
        if self.api == "chat" and k == 1:  # vLLM opens chat with a role-only delta
            out = _sse({"id": f"chatcmpl-{self.cid}", "object": "chat.completion.chunk",
                        "created": self.created, "model": MODEL,
                        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                     "logprobs": None, "finish_reason": None}]})
        if k < n:
            return out + self.mid
        out += self._openai_chunk("length")
        if (self.request.get("stream_options") or {}).get("include_usage"):
            obj = "chat.completion.chunk" if self.api == "chat" else "text_completion"
            prefix = "chatcmpl" if self.api == "chat" else "cmpl"
            out += _sse({"id": f"{prefix}-{self.cid}", "object": obj, "created": self.created,
                         "model": MODEL, "choices": [],
                         "usage": {"prompt_tokens": self.prompt_tokens,
                                   "total_tokens": self.prompt_tokens + n,
                                   "completion_tokens": n}})
        return out + _frame(b"data: [DONE]\n\n") + _END

    def _tgi_event(self, k: int, last: bool) -> bytes:
        details = None
        if last and (self.request.get("parameters") or {}).get("details"):
            details = {"finish_reason": "length", "generated_tokens": self.n,
                       "input_length": self.prompt_tokens, "seed": None}
        return _sse({"index": k, "token": {"id": k, "text": " tok", "logprob": -0.5,
                                           "special": False},
                     "top_tokens": None, "generated_text": " tok" * self.n if last else None,
                     "details": details}, space=False)


class _Clock:
    """One timer for every stream: a heap of (deadline, seq, stream)."""

    def __init__(self, server: "_Server") -> None:
        self.server = server
        self.heap: list[tuple[int, int, _Stream]] = []
        self.seq = 0
        self.handle: asyncio.Handle | None = None
        self.wake_ns: int | None = None
        self.ticking = False

    def add(self, due: int, stream: _Stream) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (due, self.seq, stream))
        if not self.ticking and (self.wake_ns is None or due - self.server.settings.spin_ns < self.wake_ns):
            self._arm(perf_counter_ns())

    def _arm(self, now: int) -> None:
        if self.handle is not None:
            self.handle.cancel()
        wait = self.heap[0][0] - self.server.settings.spin_ns - now
        loop = self.server.loop
        if wait <= 0:  # within the spin window: poll (one loop pass, sockets served) and look again
            self.handle, self.wake_ns = loop.call_soon(self._tick), now
        else:
            self.handle, self.wake_ns = loop.call_later(wait / 1e9, self._tick), now + wait

    def _tick(self) -> None:
        self.handle = self.wake_ns = None
        heap = self.heap
        emit = self.server.emit
        self.ticking = True
        now = perf_counter_ns()
        while heap and heap[0][0] <= now:
            due, _, stream = heapq.heappop(heap)
            emit(stream, due)
            now = perf_counter_ns()
        self.ticking = False
        if heap:
            self._arm(now)


class _Server:
    def __init__(self, settings: Settings, loop: asyncio.AbstractEventLoop, loop_name: str,
                 workers: int = 1, control_port: int | None = None) -> None:
        self.settings = settings
        self.loop = loop
        self.loop_name = loop_name
        self.workers = workers
        self.control_port = control_port
        self.stats = Stats()
        self.clock = _Clock(self)
        self.in_flight = 0

    # --- streams --------------------------------------------------------------------------------

    def start_stream(self, conn: "_Connection", api: str, body: bytes, read_ns: int) -> None:
        try:
            request = json.loads(body)
            if not isinstance(request, dict):
                raise ValueError("the body is not a JSON object")
            key, n = self._key_and_tokens(api, request)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            conn.respond(400, {"error": {"message": f"pacer: bad request: {exc}",
                                         "type": "BadRequestError"}})
            return
        stream = _Stream(conn, api, request, key, n, read_ns)
        conn.stream = stream
        conn.transport.write(_SSE_HEAD)
        self.in_flight += 1
        self.clock.add(read_ns + self.settings.ttft_ns, stream)

    def _key_and_tokens(self, api: str, request: dict[str, Any]) -> tuple[str, int]:
        if api == "generate":
            key = request["inputs"]
            n = (request.get("parameters") or {}).get("max_new_tokens")
        else:
            if request.get("stream") is not True:
                raise ValueError("the pacer only streams: send \"stream\": true")
            if api == "chat":
                content = request["messages"][-1]["content"]
                key = content if isinstance(content, str) else json.dumps(content)
            else:
                prompt = request["prompt"]
                key = prompt if isinstance(prompt, str) else json.dumps(prompt)
            n = request.get("max_tokens", request.get("max_completion_tokens"))
        if n is None:
            n = self.settings.tokens
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"max tokens must be a positive integer, got {n!r}")
        return str(key), n

    def emit(self, stream: _Stream, due: int) -> None:
        conn = stream.conn
        transport = conn.transport
        if conn.closed or transport.is_closing():
            self.in_flight -= 1
            self.stats.aborted += 1
            conn.stream = None
            return
        k = stream.k
        data = stream.token_bytes()
        now = perf_counter_ns()  # stamped as the bytes are handed over: a write that is
        transport.write(data)  # preempted counts against the pacer, never the client
        stats = self.stats
        stats.write_call.append(perf_counter_ns() - now)
        stats.lateness.append(now - due)
        if k == 1:
            stats.first.append(now - due)
        else:
            stats.gap_error.append(now - stream.last_write - self.settings.gap_ns)
        if transport.get_write_buffer_size():
            stats.buffered_writes += 1
        stream.last_write = now
        stream.writes.append(now)
        if k < stream.n:
            stream.k = k + 1
            self.clock.add(stream.read_ns + self.settings.ttft_ns + k * self.settings.gap_ns,
                           stream)
            return
        self.in_flight -= 1
        stats.requests_done += 1
        if len(stats.requests) < _MAX_LOGGED_REQUESTS:
            stats.requests.append((stream.key, stream.read_ns, stream.writes))
        conn.stream = None
        conn.finished_response()

    # --- everything else ------------------------------------------------------------------------

    def handle(self, conn: "_Connection", method: str, path: str, body: bytes, read_ns: int) -> None:
        api = _STREAM_PATHS.get(path)
        if api is not None and method == "POST":
            self.start_stream(conn, api, body, read_ns)
        elif (method, path) in _CONTROL_PATHS:
            if self.workers > 1:
                conn.respond(409, {"error": f"this pacer has {self.workers} workers: ask its "
                                            f"control port {self.control_port}"})
            else:
                conn.respond(200, control(path, [self.stats.raw()], self.in_flight, self.info(),
                                          reset=[self.stats.reset]))
        elif method == "GET" and path == "/health":
            conn.respond(200, {})
        elif method == "GET" and path == "/v1/models":
            conn.respond(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": 0, "owned_by": "llm-load-rig",
                 "root": MODEL, "max_model_len": 1 << 20}]})
        elif method == "GET" and path == "/version":
            conn.respond(200, {"version": VERSION})
        elif method == "GET" and path == "/info":
            conn.respond(200, {"model_id": MODEL, "version": VERSION, "max_total_tokens": 1 << 20})
        else:
            conn.respond(404, {"error": f"no {method} {path} here"})

    def info(self) -> dict[str, Any]:
        s = self.settings
        return {"ttft_ms": s.ttft_ns / 1e6, "gap_ms": s.gap_ns / 1e6, "tokens": s.tokens,
                "spin_us": s.spin_ns / 1e3, "loop": self.loop_name, "workers": self.workers,
                "pid": os.getpid()}


def control(path: str, raws: list[dict[str, Any]], in_flight: int, info: dict[str, Any],
            reset: list[Any]) -> dict[str, Any]:
    """The answer to a control request, over one or more workers' raw stats."""
    if path == "/lateness/reset":
        for forget in reset:
            forget()
        return {"reset": True}
    if path == "/requests":
        requests = [{"prompt": key, "read_ns": read_ns, "write_ns": writes}
                    for raw in raws for key, read_ns, writes in raw["requests"]]
        return {"requests": requests,
                "not_logged": sum(r["requests_done"] for r in raws) - len(requests), **info}
    return {**info, **summarize_lateness(raws, in_flight)}


class _Connection(asyncio.Protocol):
    def __init__(self, server: _Server) -> None:
        self.server = server
        self.buffer = bytearray()
        self.transport: Any = None
        self.stream: _Stream | None = None
        self.closed = False
        self.keep_alive = True
        self.arrived_ns = 0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def data_received(self, data: bytes) -> None:
        self.arrived_ns = perf_counter_ns()  # the request counts as read when its last byte is
        self.buffer += data
        if self.stream is None:
            self._next_request()

    def finished_response(self) -> None:
        if not self.keep_alive:
            self.transport.close()
        elif self.buffer:
            self._next_request()

    def _next_request(self) -> None:
        while self.stream is None and not self.closed and self.keep_alive:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > _MAX_HEAD_BYTES:
                    self._refuse(431, "request head too large")
                return
            try:
                lines = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
                method, target, version = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
            except ValueError:
                self._refuse(400, "malformed request")
                return
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self._refuse(411, "send a Content-Length")
                return
            total = end + 4 + length
            if len(self.buffer) < total:
                return
            body = bytes(self.buffer[end + 4:total])
            del self.buffer[:total]
            self.keep_alive = (version == "HTTP/1.1"
                               and headers.get("connection", "").lower() != "close")
            self.server.handle(self, method, target.split("?", 1)[0], body, self.arrived_ns)

    def respond(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 409: "Conflict",
                  411: "Length Required", 431: "Request Header Fields Too Large"}.get(status, "")
        self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\nserver: pacer\r\n%s\r\n"
                             % (status, reason.encode(), len(data),
                                b"" if self.keep_alive else b"connection: close\r\n") + data)
        if not self.keep_alive:
            self.transport.close()

    def _refuse(self, status: int, message: str) -> None:
        self.keep_alive = False
        self.respond(status, {"error": message})


# --- processes ------------------------------------------------------------------------------------

def _new_loop(kind: str) -> tuple[asyncio.AbstractEventLoop, str]:
    if kind in ("auto", "uvloop"):
        try:
            import uvloop  # type: ignore[import-not-found]
        except ImportError:
            if kind == "uvloop":
                raise SystemExit("error: --loop uvloop: uvloop is not installed") from None
        else:
            return uvloop.new_event_loop(), "uvloop"
    return asyncio.new_event_loop(), "asyncio"


def _fine_timer_slack() -> None:
    """Linux lets a sleeping process wake up to 50 us late (timer slack); ask for 1 us."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass


def _raise_file_limit() -> None:
    """One socket per stream: allow as many as the hard limit does."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY
                                                        else max(soft, 65536), hard))
    except (ImportError, ValueError, OSError):
        pass


def _listen(host: str, port: int, reuse_port: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(4096)
    sock.setblocking(False)
    return sock


def _run_loop(loop: asyncio.AbstractEventLoop, serve_forever: Any) -> None:
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async def main() -> None:
        await serve_forever()
        await stop.wait()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def _serve_worker(sock: socket.socket, settings: Settings, loop_kind: str, workers: int = 1,
                  control_port: int | None = None, pipe: Any = None) -> None:
    _fine_timer_slack()
    loop, name = _new_loop(loop_kind)
    asyncio.set_event_loop(loop)
    server = _Server(settings, loop, name, workers, control_port)
    if pipe is not None:  # commands from the parent's control server
        def on_command() -> None:
            # uvloop makes a watched fd non-blocking: a dump larger than the pipe's buffer then
            # fails with EAGAIN (seen at 256 users on 6 workers). Sends here may block.
            os.set_blocking(pipe.fileno(), True)
            try:
                command = pipe.recv()
            except (EOFError, OSError):  # the parent is gone
                loop.stop()
                return
            if command == "reset":
                server.stats.reset()
                pipe.send(None)
            else:
                pipe.send((server.stats.raw(), server.in_flight, server.info()))
        loop.add_reader(pipe.fileno(), on_command)

    async def start() -> None:
        await loop.create_server(lambda: _Connection(server), sock=sock, backlog=4096)
    _run_loop(loop, start)


def _serve_control(sock: socket.socket, pipes: list[Any], workers: int) -> None:
    """The parent of several workers: /lateness, /requests and their reset, summed."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    class Control:
        def handle(self, conn: _Connection, method: str, path: str, body: bytes, _: int) -> None:
            if (method, path) not in _CONTROL_PATHS and (method, path) != ("GET", "/health"):
                conn.respond(404, {"error": "the control port serves /lateness, /requests and "
                                            "POST /lateness/reset; streams are on the other port"})
                return
            if path == "/health":
                conn.respond(200, {})
                return
            command = "reset" if path == "/lateness/reset" else "dump"
            for pipe in pipes:
                pipe.send(command)
            answers = [pipe.recv() for pipe in pipes]
            if command == "reset":
                conn.respond(200, {"reset": True})
                return
            raws = [a[0] for a in answers]
            info = {**answers[0][2], "workers": workers, "pids": [a[2]["pid"] for a in answers]}
            conn.respond(200, control(path, raws, sum(a[1] for a in answers), info, reset=[]))

    control_server = Control()

    async def start() -> None:
        await loop.create_server(lambda: _Connection(control_server), sock=sock)  # type: ignore[arg-type]
    _run_loop(loop, start)


def serve(host: str, port: int, settings: Settings, *, workers: int = 1, loop_kind: str = "auto",
          control_port: int | None = None) -> None:
    """Serve until SIGTERM or SIGINT. Prints one line once it listens."""
    if workers <= 1:
        sock = _listen(host, port, reuse_port=False)
        print(f"pacer listening on http://{host}:{sock.getsockname()[1]}", flush=True)
        _serve_worker(sock, settings, loop_kind)
        return
    import multiprocessing
    first = _listen(host, port, reuse_port=True)
    port = first.getsockname()[1]
    socks = [first] + [_listen(host, port, reuse_port=True) for _ in range(workers - 1)]
    control_port = port + 1 if control_port is None else control_port
    control_sock = _listen(host, control_port, reuse_port=False)
    context = multiprocessing.get_context("fork")
    children, pipes = [], []
    for sock in socks:
        ours, theirs = context.Pipe()
        child = context.Process(target=_serve_worker, daemon=True,
                                args=(sock, settings, loop_kind, workers, control_port, theirs))
        child.start()
        sock.close()
        children.append(child)
        pipes.append(ours)
    print(f"pacer listening on http://{host}:{port} ({workers} workers; control on port "
          f"{control_port})", flush=True)
    try:
        _serve_control(control_sock, pipes, workers)
    finally:
        for child in children:
            child.terminate()
        for child in children:
            child.join(5)


def _port_or_any(text: str) -> int:
    """A TCP port, or 0: any free one (printed)."""
    return 0 if text.strip() == "0" else port(text)


def main(argv: list[str] | None = None) -> int:
    parser = RigParser(prog="python -m loadtest.calibration.pacer",
                       description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=_port_or_any, default=8100, help="0 = any free port (printed)")
    parser.add_argument("--ttft-ms", type=non_negative_number, default=50.0,
                        help="request read -> first token")
    parser.add_argument("--gap-ms", type=non_negative_number, default=20.0, help="between tokens")
    parser.add_argument("--tokens", type=positive_int, default=64,
                        help="tokens per answer when the request names no max_tokens")
    parser.add_argument("--workers", type=positive_int, default=1,
                        help="processes sharing the port (SO_REUSEPORT); >1 moves /lateness "
                             "and /requests to --control-port")
    parser.add_argument("--control-port", type=port, default=None, help="default: port + 1")
    parser.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    parser.add_argument("--spin-us", type=non_negative_number, default=2000.0,
                        help="wake this early and poll until each deadline (default 2000)")
    args = parser.parse_args(argv)
    settings = Settings(round(args.ttft_ms * 1e6), round(args.gap_ms * 1e6), args.tokens,
                        round(args.spin_us * 1e3))
    _raise_file_limit()
    try:
        serve(args.host, args.port, settings, workers=args.workers, loop_kind=args.loop,
              control_port=args.control_port)
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
