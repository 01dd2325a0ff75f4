"""Shared fixtures: the real embedded engine (vLLM on CPU, tiny model, eager, serving tool calls),
and a second vLLM for what that one does not serve (LoRA adapters, reasoning).

Each engine is started once per test session on a free port, when a test first asks for it, and
stopped at the end. Set RIG_ENGINE_URL to reuse an engine that is already running as the first
(it must serve the tiny model, started with tests/rig_helpers.py's VLLM_TOOLS).
"""

from __future__ import annotations

import json
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
from rig_helpers import (VLLM_EAGER, VLLM_QUICK_ENV, VLLM_TOOLS, free_port,  # noqa: E402
                         reasoning_model)
from servers.lora import build_adapters, lora_flags  # noqa: E402
from servers.vllm_cpu import TINY_MODEL  # noqa: E402
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


@pytest.fixture(scope="session")
def vllm_adapters_reasoning(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """vLLM (eager) serving two LoRA adapters built here (tests/test_lora.py) and reasoning: the
    `hf` parser on a copy of the tiny model whose template names its markers, constraints held
    from the first token (tests/test_reasoning_engine.py). One start for both tests (about 35 s
    each). Neither's requests meet the other's flags: the adapters' runs use the completions API,
    which no reasoning parser reads, and the reasoning runs ask for the base model."""
    folder = tmp_path_factory.mktemp("vllm-adapters-reasoning")
    adapters = build_adapters(TINY_MODEL, folder / "adapters", 2)
    args = [VLLM_EAGER, "--model", str(reasoning_model(folder / "tiny-think")),
            "--reasoning-parser", "hf",
            "--structured-outputs-config", json.dumps({"enable_in_reasoning": True}),
            *lora_flags(adapters)]
    with LocalEngine(port=free_port(), log_path=folder / "engine.log", extra_args=args,
                     env=VLLM_QUICK_ENV) as engine:
        yield engine.url
