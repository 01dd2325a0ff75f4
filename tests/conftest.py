"""Shared fixtures: the real embedded engine (vLLM on CPU, tiny model, eager, serving tool calls).

The engine is started once per test session on a free port and stopped at the end. Set
RIG_ENGINE_URL to reuse an engine that is already running (it must serve the tiny model, started
with tests/rig_helpers.py's VLLM_TOOLS).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# No per-example deadline: the tests run beside engines on 2 cores, where a slow example is the
# machine's load, not a failure (speed goals live in benchmarks, not in tests).
settings.register_profile("rig", deadline=None)
settings.load_profile("rig")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadtest.local_engine import LocalEngine, _healthy  # noqa: E402
from rig_helpers import VLLM_EAGER, VLLM_QUICK_ENV, VLLM_TOOLS, free_port  # noqa: E402
from tiers import ENGINE_FIXTURES, EngineWatch  # noqa: E402
from file_queue import (  # noqa: E402,F401 (its hooks)
    longest_first, pytest_addoption, pytest_runtest_makereport, pytest_runtest_protocol,
    pytest_sessionfinish)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """An engine fixture makes its test an engine test, whatever its markers say. A parameter
    that only shares a fixture's name (`@pytest.mark.parametrize("engine", ...)`) does not.
    Under --file-queue, the longest files first (tests/file_queue.py)."""
    longest_first(config, items)
    for item in items:
        callspec = getattr(item, "callspec", None)
        parameters = set(callspec.params) if callspec else set()
        if ENGINE_FIXTURES & (set(getattr(item, "fixturenames", ())) - parameters):
            item.add_marker(pytest.mark.engine)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A test in the fast tier that starts an engine fails, naming the marker it needs."""
    if item.get_closest_marker("engine") or item.get_closest_marker("docker"):
        return (yield)
    with EngineWatch() as watch:
        result = yield
    if watch.seen:
        pytest.fail(f"this test starts an engine, {watch.seen}, but is not marked "
                    "@pytest.mark.engine (or docker): scripts/test.sh --fast would run it",
                    pytrace=False)
    return result


@pytest.fixture(scope="session")
def engine_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("RIG_ENGINE_URL", "")
    if url:
        assert _healthy(url), f"RIG_ENGINE_URL={url} does not answer /health"
        yield url
        return
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    # Eager: no torch.compile warm-up on a 2-core machine (tens of seconds); these tests are of
    # the rig against vLLM's server, which answers the same. The race tests keep the default.
    # Tool calls too (VLLM_TOOLS): the structured workload's test shares it, a vLLM start less.
    with LocalEngine(port=free_port(), log_path=log, extra_args=[VLLM_EAGER, *VLLM_TOOLS],
                     env=VLLM_QUICK_ENV) as engine:
        yield engine.url
