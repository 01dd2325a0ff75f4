"""exllamav3's own count of the tokens it generated, for text-generation-webui's ExLlamav3 loader,
served where the rig reads an engine's counter (Prometheus text on 127.0.0.1:API port + 5).

That loader has no llama-server to count for it, and its answers carry no count: its usage
re-tokenizes the answer's text, and its stream never sends the text of a job's last result (its
``generate_with_streaming`` stops at the result marked ``eos`` without yielding that result's
text). exllamav3's generator says how many tokens each finished job made (``new_tokens`` in the
job's last result, the one marked ``eos``); ``Generator.iterate`` is wrapped to add them up.

Loaded by boot.py, in textgen's interpreter, before server.py: standard library only here.
"""

from __future__ import annotations

import functools
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable

NAME = "exllamav3:new_tokens_total"  # servers/textgen.py's EXL3_NEW_TOKENS
PORT_OFFSET = 5  # servers/textgen.py's INNER_PORT_OFFSET: where llama.cpp's loader puts its llama-server


class Counter:
    """Tokens made by finished jobs (cancelled ones never finish, and are not counted)."""

    def __init__(self) -> None:
        self.total = 0
        self._lock = threading.Lock()

    def add(self, results: Iterable[dict[str, Any]]) -> None:
        made = sum(int(r.get("new_tokens") or 0) for r in results if r.get("eos"))
        if made:
            with self._lock:
                self.total += made

    def metrics(self) -> bytes:
        return f"# TYPE {NAME} counter\n{NAME} {self.total}\n".encode()


def count_iterations(generator_class: type, counter: Counter) -> None:
    """Wraps ``generator_class.iterate`` so that every result it returns passes ``counter``."""
    iterate: Callable[..., list[dict[str, Any]]] = generator_class.iterate

    @functools.wraps(iterate)
    def counted(self: Any, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        results = iterate(self, *args, **kwargs)
        counter.add(results)
        return results

    generator_class.iterate = counted


def serve(counter: Counter, port: int) -> ThreadingHTTPServer:
    """``counter`` as Prometheus text on 127.0.0.1:``port`` (any path), from a daemon thread."""

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = counter.metrics()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Metrics)
    threading.Thread(target=server.serve_forever, name="exllamav3-counter", daemon=True).start()
    return server


def start(api_port: int, warn: Callable[[str], None]) -> Counter | None:
    """Counts exllamav3's generated tokens and serves the count beside the API; None (with a
    warning: the rig's runs then stay on usage) where exllamav3 does not import or the port is taken."""
    try:
        from exllamav3 import Generator
    except Exception as exc:  # noqa: BLE001 - any import failure: the loader reports it itself
        warn(f"exllamav3 does not import ({exc}): its generated tokens are not counted")
        return None
    counter = Counter()
    try:
        serve(counter, api_port + PORT_OFFSET)
    except OSError as exc:
        warn(f"port {api_port + PORT_OFFSET} for the generated-token count: {exc.strerror or exc}; "
             "runs count usage instead")
        return None
    count_iterations(Generator, counter)
    return counter
