"""An engine that dies mid-run, or dies and comes back: every request is recorded with its
reason, the run ends by itself, nothing is lost, and nothing is left running."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from rig_helpers import assert_every_request_accounted, crash_under_run, free_port, run_locust
from loadtest.local_engine import LocalEngine
from servers.local import LOCAL

pytestmark = pytest.mark.engine  # every test here starts a real engine


def test_engine_killed_mid_run_leaves_complete_records_and_a_row(tmp_path: Path):
    """llama.cpp's server (up in a second) killed mid-run; vLLM's own crash, its API server
    killed under a sweep, is test_sweep_real's."""
    why = LOCAL["llamacpp-cpu"].missing()
    if why:
        pytest.skip(why)
    out = tmp_path / "out"
    with LocalEngine(port=free_port(), engine="llamacpp-cpu",
                     log_path=tmp_path / "engine.log") as engine:
        assert engine.process is not None
        pid = engine.process.pid
        log = crash_under_run(engine.url, out, lambda: os.killpg(pid, signal.SIGKILL),
                              "--engine", "llamacpp-cpu", requests=200, max_tokens=128)
    assert_every_request_accounted(log, out, requests=200, max_tokens=128)


def test_engine_restarted_mid_run_then_serves_the_next_run(tmp_path: Path):
    """llama.cpp's server killed (a crash) and started again on the same port while the rig is
    mid-run: in-flight answers are cut, requests sent while it is down find no connection, then
    HTTP 503 while the new one loads its model (a closed-loop user sends its next request at
    once, so an outage uses up the workload fast: the run is marked invalid, not retried); the
    rig's pooled connections do not outlive the old server: the next run is clean."""
    why = LOCAL["llamacpp-cpu"].missing()
    if why:
        pytest.skip(why)
    port, out = free_port(), tmp_path / "out"
    first = LocalEngine(port=port, engine="llamacpp-cpu", log_path=tmp_path / "first.log")
    second = LocalEngine(port=port, engine="llamacpp-cpu", log_path=tmp_path / "second.log")

    def restart() -> None:
        assert first.process is not None
        os.killpg(first.process.pid, signal.SIGKILL)
        first.process.wait(30)
        second.start(timeout_s=60)

    try:
        first.start(timeout_s=60)
        log = crash_under_run(first.url, out, restart, "--engine", "llamacpp-cpu",
                              requests=200, max_tokens=128)
        records = assert_every_request_accounted(
            log, out, requests=200, max_tokens=128,
            kinds=frozenset({"truncated", "connect", "http_status"}))
        assert {r["http_status"] for r in records if r["error_kind"] == "http_status"} <= {503}
        after = run_locust("--host", second.url, "--engine", "llamacpp-cpu", "--users", "4",
                           "--requests", "16", "--max-tokens", "16", "--ignore-eos",
                           "--out", str(tmp_path / "after"))
        assert after.returncode == 0, after.stderr[-2000:]
    finally:
        first.stop()
        second.stop()
    assert first.process is None or first.process.poll() is not None
    assert second.process is None or second.process.poll() is not None
