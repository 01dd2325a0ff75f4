"""A run not told --flags records the command the rig started its engine at --host with on this
host (loadtest/local_engine.py's state file: the argv it ran and the variables that set it up,
secrets hidden), and says where its flags came from: two runs against one engine started with
other settings, given as flags, `.env` settings or environment variables, never share a report
cell.

Fast: the commands rendered from the real recipes, and the state file's round trip with a
sleeping process standing in for the engine, as tests/test_clean_by_default.py does. Engine:
llama.cpp started twice through `rig engine start`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from rig_helpers import REPO, free_port, run_locust

from loadtest.client.run import recorded_flags
from loadtest.launch import RunSpec, command
from loadtest.local_engine import LocalEngine, command_line, started_engines, started_flags
from loadtest.report.runset import load_runs
from loadtest.report.tables import cell_table
from loadtest.sweep.cells import run_flags
from loadtest.sweep.matrix import EngineConfig
from servers.check import read_env_file
from servers.local import LOCAL
from servers.vllm import ENGINE as VLLM, VLLM_FLAGS, gpu_recipe

SECRET = "sk-abcdefgh12345"


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


def test_a_command_is_spelled_once_variables_first_secrets_hidden():
    assert command_line([]) == ""
    assert command_line(["taskset", "-c", "1", "llama-server", "--parallel", "4"]) == \
        "taskset -c 1 llama-server --parallel 4"
    assert command_line(["s", "--lora", "a b.gguf"], {"Z": "1", "A": "x"}) == "A=x Z=1 s --lora 'a b.gguf'"
    assert command_line(["s", "--api-key", SECRET], {"HF_TOKEN": "hf_abcdefgh1234"}) == \
        "HF_TOKEN=*** s --api-key ***"


def _vllm(monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], **options: object) -> str:
    """The command vLLM's real recipe runs with these settings (its .env names), as a row
    records it: the recipe built from them, as `rig engine start --engine vllm` builds it."""
    monkeypatch.setitem(LOCAL, "vllm", gpu_recipe(VLLM, VLLM_FLAGS, settings))
    return LocalEngine(8000, engine="vllm", **options).flags  # type: ignore[arg-type]


def test_a_setting_given_as_a_flag_is_in_the_command(monkeypatch: pytest.MonkeyPatch):
    flags = _vllm(monkeypatch, {}, extra_args=["--max-num-seqs", "256"], cpus="0")
    assert " taskset -c 0 " in flags
    assert flags.endswith(" serve --host 127.0.0.1 --port 8000 --model "
                          f"{REPO / 'models' / 'tiny-llama'} --max-num-seqs 256")


def test_a_setting_from_a_dotenv_file_is_in_the_command(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    (tmp_path / ".env").write_text("# the documented way\nVLLM_MAX_CONCURRENT_REQUESTS=256\n"
                                   "VLLM_SPECULATE=3\n")
    flags = _vllm(monkeypatch, read_env_file(tmp_path / ".env"))
    assert " --max-num-seqs 256 " in f"{flags} "
    assert " --speculative-config.num_speculative_tokens 3 " in flags


def test_a_setting_from_the_environment_is_in_the_command(monkeypatch: pytest.MonkeyPatch):
    """The issue's case: VLLM_MAX_CONCURRENT_REQUESTS=256 in the shell recorded only the cores.
    The recipe turns it into its flag and unsets it for the engine; a variable vLLM reads
    itself is recorded as the engine has it."""
    monkeypatch.setenv("VLLM_MAX_CONCURRENT_REQUESTS", "256")
    monkeypatch.setenv("VLLM_ATTENTION_BACKEND", "FLASH_ATTN")
    flags = _vllm(monkeypatch, dict(os.environ), cpus="0")
    assert flags.endswith(" --max-num-seqs 256")
    assert " env -u VLLM_MAX_CONCURRENT_REQUESTS " in flags
    assert "VLLM_ATTENTION_BACKEND=FLASH_ATTN " in flags
    assert "VLLM_MAX_CONCURRENT_REQUESTS=" not in flags  # unset for it: a flag, not a variable
    default = _vllm(monkeypatch, {}, cpus="0")
    assert "--max-num-seqs" not in default and default != flags


def test_llama_cpp_reads_its_own_variables_and_they_are_recorded(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LLAMA_ARG_N_PARALLEL", "3")
    monkeypatch.setenv("UNRELATED_SETTING", "x")
    flags = LocalEngine(8082, engine="llamacpp-cpu").flags
    assert flags.startswith("LLAMA_ARG_N_PARALLEL=3 ") and "UNRELATED_SETTING" not in flags


def test_no_secret_reaches_the_command_however_it_was_given(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VLLM_API_KEY", SECRET)
    flags = _vllm(monkeypatch, {**os.environ, "VLLM_EXTRA_ARGS": f"--api-key {SECRET}"},
                  extra_args=["--hf-token", "hf_abcdefgh1234"])
    assert SECRET not in flags and "hf_abcdefgh1234" not in flags
    assert "VLLM_API_KEY=***" in flags and "--api-key ***" in flags and "--hf-token ***" in flags


def test_the_state_file_carries_the_flags_it_was_started_with(sleepers):
    port = free_port()
    engine = _written(sleepers, port, extra_args=["--parallel", "4"], cpus="0",
                      env={"LLAMA_ARG_X": "1"})
    (state,) = started_engines()
    assert state["flags"] == engine.flags
    assert engine.flags.startswith("LLAMA_ARG_X=1 ") and " taskset -c 0 " in engine.flags
    assert engine.flags.endswith(" --parallel 4")
    assert started_flags(f"http://localhost:{port}") == engine.flags
    assert started_flags(f"http://127.0.0.1:{port + 1}") is None  # nothing the rig started there


def test_a_balancer_reads_its_replicas_and_says_when_they_differ(sleepers):
    a, b, c = free_port(), free_port(), free_port()
    first = _written(sleepers, a, extra_args=["--parallel", "4"])
    _written(sleepers, b, extra_args=["--parallel", "4"])
    third = _written(sleepers, c, extra_args=["--parallel", "8"])
    balancer, replica = "http://127.0.0.1:1", "http://127.0.0.1:{}".format
    assert started_flags(balancer, [replica(a), replica(a)]) == first.flags
    assert started_flags(balancer, [replica(a), replica(c)]) == f"{first.flags} | {third.flags}"
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
    started = _written(sleepers, port, extra_args=["--parallel", "4"]).flags
    url = f"http://127.0.0.1:{port}"

    def row(flags: str | None, at: str = url, behind: tuple[str, ...] = ()) -> dict[str, str]:
        return recorded_flags(SimpleNamespace(flags=flags, url=at, engine_urls=behind))  # type: ignore[arg-type]

    assert row(None) == {"flags": started, "flags_from": "started engine"}
    assert row("--parallel 2") == {"flags": "--parallel 2", "flags_from": "--flags"}
    assert row("") == {"flags": "", "flags_from": "--flags"}  # told: none
    assert row(None, "http://127.0.0.1:1") == {"flags": "", "flags_from": ""}
    assert row(None, "http://127.0.0.1:1", (url,)) == {"flags": started,
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
        told.append(engine["flags"])  # the command it ran: `start`'s cores, the flags given
        assert engine["flags"].endswith(f" --parallel {slots}")
        assert not engine["cpus"] or f" taskset -c {engine['cpus']} " in f" {engine['flags']}"
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
