"""Helpers the tests share: the repository root, a free port, the Locust CLI as users run it,
the pacing server.

(Not in conftest.py: tests/compose has a conftest of its own, and `from conftest import` would
pick whichever pytest imported first.)
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_locust(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    """The rig's Locust CLI exactly as a user runs it."""
    cmd = [str(REPO / ".venv" / "bin" / "locust"), "-f", str(REPO / "loadtest" / "engines.py"),
           "--headless", "--only-summary", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=REPO)


@contextmanager
def running_pacer(*args: str, timeout_s: float = 30) -> Iterator[str]:
    """The pacing server (loadtest/calibration/pacer.py) in its own process on a free port;
    yields its URL and stops it at the end."""
    with _listening([sys.executable, "-m", "loadtest.calibration.pacer", *args],
                    timeout_s) as url:
        yield url


@contextmanager
def running_fault_proxy(upstream: str, *args: str, timeout_s: float = 30) -> Iterator[str]:
    """tests/fault_proxy.py in front of `upstream` on a free port; yields its URL."""
    with _listening([sys.executable, str(REPO / "tests" / "fault_proxy.py"), "--upstream",
                     upstream, *args], timeout_s) as url:
        yield url


@contextmanager
def _listening(cmd: list[str], timeout_s: float) -> Iterator[str]:
    """Start `cmd --port P` and wait for the "listening" line it prints once it accepts."""
    port = free_port()
    process = subprocess.Popen([*cmd, "--port", str(port)], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        line = process.stdout.readline()
        assert "listening" in line, line + process.stdout.read()
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout_s)
