"""A run not told --flags records those the rig started its engine at --host with on this host
(loadtest/local_engine.py's state file), and says where its flags came from: two runs against
one engine started with other arguments never share a report cell.

Fast: the state file's round trip with a sleeping process standing in for the engine, as
tests/test_clean_by_default.py does. Engine: llama.cpp started twice through `rig engine start`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from rig_helpers import REPO, free_port, run_locust

from loadtest.client.run import recorded_flags
from loadtest.launch import RunSpec, command
from loadtest.local_engine import LocalEngine, engine_flags, started_engines, started_flags
from loadtest.report.runset import load_runs
from loadtest.report.tables import cell_table
from loadtest.sweep.cells import run_flags
from loadtest.sweep.matrix import EngineConfig
from servers.local import LOCAL


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RIG_STATE_DIR", str(tmp_path / "engines"))
    return tmp_path / "engines"


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def _written(sleepers: list[subprocess.Popen[bytes]], port: int, **options: object) -> LocalEngine:
    """A LocalEngine's state file as it writes it at launch, a sleeping process as its engine."""
    engine = LocalEngine(port, engine="llamacpp-cpu", **options)  # type: ignore[arg-type]
    engine.process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    sleepers.append(engine.process)
    engine._write_state()
    return engine


def test_the_flags_are_spelled_once_cores_first_secrets_hidden():
    assert engine_flags() == ""
    assert engine_flags(["--parallel", "4"], cpus="1") == "--cpus 1 --parallel 4"
    assert engine_flags(["--lora", "a b.gguf"], cpus="1-3", compute_cpus="2-3",
                        env={"Z": "1", "A": "x"}) == "A=x Z=1 --cpus 1-3 --compute-cpus 2-3 --lora 'a b.gguf'"
    assert engine_flags(cpus="1", compute_cpus="1") == "--cpus 1"  # the same cores: said once
    assert engine_flags(["--api-key", "sk-abcdefgh12345"]) == "--api-key ***"


def test_the_state_file_carries_the_flags_it_was_started_with(sleepers):
    port = free_port()
    engine = _written(sleepers, port, extra_args=["--parallel", "4"], cpus="0",
                      env={"LLAMA_ARG_X": "1"})
    (state,) = started_engines()
    assert state["flags"] == engine.flags == "LLAMA_ARG_X=1 --cpus 0 --parallel 4"
    assert started_flags(f"http://localhost:{port}") == engine.flags
    assert started_flags(f"http://127.0.0.1:{port + 1}") is None  # nothing the rig started there


def test_a_balancer_reads_its_replicas_and_says_when_they_differ(sleepers):
    a, b, c = free_port(), free_port(), free_port()
    _written(sleepers, a, extra_args=["--parallel", "4"])
    _written(sleepers, b, extra_args=["--parallel", "4"])
    _written(sleepers, c, extra_args=["--parallel", "8"])
    balancer, replica = "http://127.0.0.1:1", "http://127.0.0.1:{}".format
    assert started_flags(balancer, [replica(a), replica(b)]) == "--parallel 4"
    assert started_flags(balancer, [replica(a), replica(c)]) == "--parallel 4 | --parallel 8"
    # one replica the rig did not start here: its flags are unknown, so none are claimed
    assert started_flags(balancer, [replica(a), "http://127.0.0.1:2"]) is None
    assert started_flags(balancer) is None


def test_an_older_rigs_state_file_without_flags_claims_none(state: Path, sleepers):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    sleepers.append(process)
    state.mkdir(parents=True)
    (state / f"{port}.json").write_text(json.dumps(
        {"pid": process.pid, "engine": "llamacpp-cpu", "port": port, "cpus": ""}))
    assert started_flags(f"http://127.0.0.1:{port}") is None


def test_flags_given_always_win_and_each_row_says_where_its_came_from(sleepers):
    port = free_port()
    _written(sleepers, port, extra_args=["--parallel", "4"])
    url = f"http://127.0.0.1:{port}"

    def row(flags: str | None, at: str = url, behind: tuple[str, ...] = ()) -> dict[str, str]:
        return recorded_flags(SimpleNamespace(flags=flags, url=at, engine_urls=behind))  # type: ignore[arg-type]

    assert row(None) == {"flags": "--parallel 4", "flags_from": "started engine"}
    assert row("--parallel 2") == {"flags": "--parallel 2", "flags_from": "--flags"}
    assert row("") == {"flags": "", "flags_from": "--flags"}  # told: none
    assert row(None, "http://127.0.0.1:1") == {"flags": "", "flags_from": ""}
    assert row(None, "http://127.0.0.1:1", (url,)) == {"flags": "--parallel 4",
                                                       "flags_from": "started engine"}


def test_rig_run_passes_flags_on_only_when_given():
    """Not given, the run reads them; given, even empty, they reach the locustfile as told."""
    from loadtest.cli.run import parser
    from loadtest.client.options import config_from_options

    def run_of(*words: str) -> tuple[str | None, list[str]]:
        args = parser().parse_args(["--engine", "llamacpp-cpu", *words])
        return (config_from_options(args, "http://127.0.0.1:1").flags,
                [w for w in command(RunSpec.from_options(args)) if w.startswith("--flags")])

    assert run_of() == (None, [])
    assert run_of("--flags=") == ("", ["--flags="])
    assert run_of("--flags=--parallel 4") == ("--parallel 4", ["--flags=--parallel 4"])


def _started(port: int, pidfile: Path, log: Path, *extra: str) -> None:
    started = subprocess.run([sys.executable, "-m", "loadtest.local_engine", "start", "--engine",
                              "llamacpp-cpu", "--port", str(port), "--pidfile", str(pidfile),
                              "--log", str(log), "--", *extra],
                             cwd=REPO, capture_output=True, text=True, timeout=300)
    assert started.returncode == 0, started.stderr[-2000:]


def _stopped(pidfile: Path) -> None:
    subprocess.run([sys.executable, "-m", "loadtest.local_engine", "stop", "--pidfile",
                    str(pidfile)], cwd=REPO, timeout=60)


@pytest.mark.engine
def test_runs_against_one_engine_started_with_other_arguments_land_in_other_cells(tmp_path: Path):
    """The evidence's case: the same engine at the same port, started twice with other engine
    arguments, each run without --flags; the report keeps them apart."""
    if LOCAL["llamacpp-cpu"].missing():
        pytest.skip(LOCAL["llamacpp-cpu"].missing() or "")
    port, out, told = free_port(), tmp_path / "out", []
    for slots in ("2", "4"):
        pidfile = tmp_path / f"engine-{slots}.pid"
        try:
            _started(port, pidfile, tmp_path / f"engine-{slots}.log", "--parallel", slots)
            (engine,) = started_engines()
            result = run_locust("--engine", "llamacpp-cpu", "--host", f"http://127.0.0.1:{port}",
                                "--requests", "2", "--max-tokens", "4", "--out", str(out))
            assert result.returncode == 0, result.stderr[-2000:]
        finally:
            _stopped(pidfile)
        cores = f"--cpus {engine['cpus']} " if engine["cpus"] else ""  # `start`'s default layout
        told.append(f"{cores}--parallel {slots}")
        assert engine["flags"] == told[-1]
    runs = load_runs(out)
    assert sorted(runs["flags"]) == told and set(runs["flags_from"]) == {"started engine"}
    cells = cell_table(runs)
    assert sorted(cells["flags"]) == told and list(cells["runs"]) == [1, 1]


def test_a_sweep_of_a_running_engine_told_no_flags_leaves_them_to_the_run():
    """A running engine's cell run gets --flags only where the matrix gave some; otherwise the
    run records what the rig started that engine with (or nothing, as before)."""
    running = EngineConfig("llamacpp-cpu", "running", {}, "", host="http://127.0.0.1:8080")
    told = EngineConfig("llamacpp-cpu", "running", {}, "", host="http://127.0.0.1:8080",
                        flags_text="--parallel 4")
    local = EngineConfig("llamacpp-cpu", "local", {"PARALLEL": "4"}, "")
    default = EngineConfig("llamacpp-cpu", "local", {}, "")
    assert [run_flags(c) for c in (running, told, local, default)] == [
        None, "--parallel 4", "PARALLEL=4", ""]
