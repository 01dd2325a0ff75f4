"""An engine's generated-token counter read before and after a run (loadtest/telemetry/output_counter.py):
a read that times out is asked again, since one lost read leaves the whole run on usage's counts."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import loadtest.telemetry.output_counter as output_counter
from servers.textgen_cpu import SPEC


class _SlowFirst(BaseHTTPRequestHandler):
    """/metrics whose first answer comes after `delay_s` (a busy engine on a starved host)."""

    answered = 0
    delay_s = 0.6

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).answered += 1
        if type(self).answered == 1:
            time.sleep(self.delay_s)
        body = b"# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total 512\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_read_that_times_out_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output_counter, "_TIMEOUT_S", 0.2)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowFirst)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        api_port = server.server_address[1] - SPEC.target.output_tokens_counter[1]
        assert output_counter.read_output_counter(f"http://127.0.0.1:{api_port}", SPEC.target) == 512
        assert _SlowFirst.answered >= 2
    finally:
        server.shutdown()


def test_a_refused_read_is_not_asked_again() -> None:
    started = time.monotonic()
    assert output_counter.read_output_counter("http://127.0.0.1:1", SPEC.target) is None
    assert time.monotonic() - started < 1.0
