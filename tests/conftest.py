"""Shared fixtures: the real embedded engine (vLLM on CPU, tiny model), and the Locust CLI.

The engine is started once per test session on a free port and stopped at the end. Set
RIG_ENGINE_URL to reuse an engine that is already running (it must serve the tiny model).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from loadtest.local_engine import LocalEngine, _healthy  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def engine_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("RIG_ENGINE_URL", "")
    if url:
        assert _healthy(url), f"RIG_ENGINE_URL={url} does not answer /health"
        yield url
        return
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    with LocalEngine(port=free_port(), log_path=log) as engine:
        yield engine.url


def run_locust(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    """The rig's Locust CLI exactly as a user runs it."""
    cmd = [str(REPO / ".venv" / "bin" / "locust"), "-f", str(REPO / "loadtest" / "engines.py"),
           "--headless", "--only-summary", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=REPO)
