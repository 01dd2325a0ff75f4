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
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "loadtest.calibration.pacer", "--port",
                                str(port), *args], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        line = process.stdout.readline()  # printed once it listens
        assert "listening" in line, line + process.stdout.read()
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout_s)
