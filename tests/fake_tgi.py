"""A stand-in for Text Generation Inference's native API, for tests only: no real TGI runs here.

It follows engines.md exactly, quirks included: `GET /info` and `/health`; `POST
/generate_stream` answers SSE over chunked encoding with one `data:{...}` event per token (no
space after the colon, no `[DONE]`), `details: null` on every event but the last, whose
`details` has finish_reason, generated_tokens and input_length (only when the request asked
for `details: true`). Its cadence is known (`prefill_s`, then one token every `token_s`), which
lets a test check what the rig measures against what the server did.

`drop_second_request=True` closes each connection, unanswered, when its second request arrives:
what uvicorn does to a kept-alive connection whose request it did not read within its
keep-alive timeout, and what llama.cpp's server does to some connections of a burst.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from statistics import median

import psutil

__all__ = ["FakeTGI", "Served", "served_medians"]


@dataclass(frozen=True)
class Served:
    """One streamed answer as the server sent it, in seconds from reading its request."""
    events_s: tuple[float, ...]  # when each token's event was handed to the socket
    end_s: float  # when the last token's event was (the end the client can see first)
    received_s: float = 0.0  # time.perf_counter() when the request was read (CLOCK_MONOTONIC,
    # one clock for every process of the host: comparable with a record's sent_ns)

    @property
    def gaps_s(self) -> list[float]:
        return [b - a for a, b in zip(self.events_s, self.events_s[1:])]


def served_medians(served: list[Served]) -> dict[str, float]:
    """The server's side of a run's p50 columns (ms): what the rig should have seen."""
    return {"ttft_p50_ms": 1000 * median(s.events_s[0] for s in served),
            "itl_p50_ms": 1000 * median(gap for s in served for gap in s.gaps_s),
            "e2e_p50_ms": 1000 * median(s.end_s for s in served)}


class FakeTGI:
    def __init__(self, prefill_s: float = 0.05, token_s: float = 0.02,
                 count_connections: bool = False, drop_second_request: bool = False) -> None:
        self.prefill_s, self.token_s = prefill_s, token_s
        self.drop_second_request = drop_second_request
        self.dropped = 0
        self.count_connections = count_connections  # costs ~10 ms in the first request
        self.server = _Server(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.connected_at_first_post: int | None = None  # client connections open at that moment
        self.idle_before_first_request: dict[int, float] = {}  # client port -> seconds
        self.served: list[Served] = []
        self._lock = threading.Lock()

    def __enter__(self) -> "FakeTGI":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _count_first_post(self) -> None:
        if not self.count_connections:
            return
        with self._lock:
            if self.connected_at_first_post is None:
                port = self.server.server_address[1]
                self.connected_at_first_post = sum(
                    1 for c in psutil.net_connections("tcp")
                    if c.laddr and c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()  # real servers (uvicorn, axum) disable Nagle: small writes go now
                self.opened = time.monotonic()
                self.requests_seen = 0
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *_: object) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/info":
                    self._json({"model_id": "fake/tgi-model", "version": "3.3.7",
                                "max_total_tokens": 4096})
                elif self.path == "/health":
                    self._json({})
                else:
                    self._json({"error": "not found"}, status=404)

            def do_POST(self) -> None:
                received = time.perf_counter()
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self.requests_seen += 1
                if fake.drop_second_request and self.requests_seen == 2:
                    with fake._lock:
                        fake.dropped += 1
                    self.close_connection = True  # no byte of an answer
                    return
                fake._count_first_post()
                fake.idle_before_first_request.setdefault(self.client_address[1],
                                                          time.monotonic() - self.opened)
                if self.path != "/generate_stream":
                    self._json({"error": "not found"}, status=404)
                    return
                parameters = request.get("parameters", {})
                tokens = parameters.get("max_new_tokens", 1024)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                time.sleep(fake.prefill_s)
                events: list[float] = []
                for index in range(1, tokens + 1):
                    last = index == tokens
                    details = None
                    if last and parameters.get("details"):
                        details = {"finish_reason": "length", "generated_tokens": tokens,
                                   "input_length": len(request["inputs"].split()), "seed": None}
                    event = {"index": index,
                             "token": {"id": index, "text": " tok", "logprob": -0.5,
                                       "special": False},
                             "top_tokens": None,
                             "generated_text": " tok" * tokens if last else None,
                             "details": details}
                    # stamped before the write: the client may read the event before this
                    # thread runs again, so a stamp after it could trail what the client saw
                    events.append(time.perf_counter() - received)
                    self._chunk(b"data:" + json.dumps(event).encode() + b"\n\n")
                    if not last:
                        time.sleep(fake.token_s)
                self._chunk(b"")
                with fake._lock:  # the answer ends with its last event (written after its stamp)
                    fake.served.append(Served(tuple(events), events[-1], received))

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _json(self, body: dict, status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # like real servers: a burst of connections is not turned away
