"""Shared fixtures: the real embedded engine (vLLM on CPU, tiny model).

The engine is started once per test session on a free port and stopped at the end. Set
RIG_ENGINE_URL to reuse an engine that is already running (it must serve the tiny model).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadtest.local_engine import LocalEngine, _healthy  # noqa: E402
from rig_helpers import free_port  # noqa: E402


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
