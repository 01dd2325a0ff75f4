"""The in-process engines' one table (loadtest/inprocess/engines.py) against the engine specs
(servers/registry.py): every server an in-process engine pairs with is a spec that starts
locally, on the same model, binding its threads as the in-process side does; every adapter
module imports, in the rig's venv and in its engine's (skipped where that venv is not installed,
with the line `rig inprocess` gives); the worker's modules and `rig overhead`'s pairs are the
table's.

Fast: nothing here starts an engine (the engines' own venvs only import the adapter modules).
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from loadtest.inprocess import overhead  # noqa: E402
from loadtest.inprocess.engines import ADAPTERS, ENGINES, PAIRS  # noqa: E402
from servers.registry import SPECS  # noqa: E402


@pytest.mark.parametrize("slug", list(ENGINES))
def test_the_paired_server_is_a_spec_that_starts_locally_on_the_same_model(slug: str) -> None:
    engine = ENGINES[slug]
    assert engine.server or not engine.pair, f"{slug}: an overhead pair needs its server"
    if not engine.server:
        return
    assert engine.server in SPECS, f"{slug}: its server {engine.server!r} is no engine spec"
    local = SPECS[engine.server].local
    assert local is not None, f"{slug}: its server {engine.server} has no local recipe"
    assert str(engine.model) in local.command(18123, []), f"{slug}: not {engine.server}'s model"
    binds = local.bind_compute("1-3")
    assert binds.items() <= engine.environment("1-3").items(), \
        f"{slug}: its threads are not bound as {engine.server}'s recipe binds them ({binds})"


def test_the_overhead_pairs_and_the_workers_modules_are_the_tables() -> None:
    paired = [e for e in ENGINES.values() if e.pair]
    assert len({e.pair for e in paired}) == len(paired), "a pair name given twice"
    assert overhead.PAIRS is PAIRS
    assert PAIRS == {e.pair: (e.server, e.slug) for e in paired}
    assert PAIRS == {"vllm": ("vllm-cpu", "vllm-offline"), "llamacpp": ("llamacpp-cpu", "llama-cpp-python")}
    assert f"of: {', '.join(PAIRS)} (default all)" in " ".join(overhead.parser().format_help().split())
    assert ADAPTERS == {e.adapter for e in ENGINES.values()}


def test_every_adapter_module_is_in_the_table() -> None:
    """A module of loadtest/inprocess/ with an `Adapter` class is one the worker can load."""
    folder = REPO / "loadtest" / "inprocess"
    written = {f"loadtest.inprocess.{path.stem}" for path in folder.glob("*.py")
               if re.search(r"^class Adapter\b", path.read_text(), re.MULTILINE)}
    assert written == ADAPTERS


@pytest.mark.parametrize("slug", list(ENGINES))
def test_the_adapter_module_imports_here_and_in_its_engines_venv(slug: str) -> None:
    """Here: the module imports its library only when the adapter is made (so `Missing` names
    the install step). In the engine's venv, as the worker imports it."""
    engine = ENGINES[slug]
    assert callable(importlib.import_module(engine.adapter).Adapter)
    if not engine.python.exists():
        pytest.skip(engine.missing() or "")
    code = (f"import importlib, loadtest.inprocess.worker as w\n"
            f"assert callable(importlib.import_module({engine.adapter!r}).Adapter)\n")
    done = subprocess.run([str(engine.python), "-"], input=code, capture_output=True, text=True,
                          cwd=REPO, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_short_in_process_run_says_how_many_requests_would_rank_it():
    """The H200 lease's ExLlamaV3 batch 4 ran 16 requests in 2.1 s (short_run): the command says
    the count that would last the race's target, as the race raises a short heat; valid runs and
    runs with failed requests say nothing."""
    from loadtest.inprocess.cli import short_run_hints
    from loadtest.race.plan import raised_counts

    rows = [{"users": 4, "requests": 16, "completion_time_s": 2.1336, "failed": 0,
             "verdict_reasons": "short_run"},
            {"users": 16, "requests": 64, "completion_time_s": 10.2, "failed": 0, "verdict_reasons": ""},
            {"users": 64, "requests": 256, "completion_time_s": 3.0, "failed": 2,
             "verdict_reasons": "failed_requests;short_run"}]
    [hint] = short_run_hints(rows)
    assert hint.startswith("note: batch 4's run was too short to rank (short_run): --requests ")
    assert f"--requests {raised_counts(rows)[4]} " in hint and raised_counts(rows)[4] >= 16 * 3
