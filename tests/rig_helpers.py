"""Helpers the tests share: the repository root, a free port, the Locust CLI as users run it.

(Not in conftest.py: tests/compose has a conftest of its own, and `from conftest import` would
pick whichever pytest imported first.)
"""

from __future__ import annotations

import socket
import subprocess
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
