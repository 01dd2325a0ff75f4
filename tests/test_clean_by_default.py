"""Clean by default on one host: an engine the rig started is written down with its cores, and a
client run against it moves itself to the other cores (loadtest/local_engine.py), saying so.

Fast: the "engine" here is a sleeping process with a state file, as LocalEngine writes one; the
client is a fresh Python process, so its affinity is its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rig_helpers import REPO, free_port, run_locust

from loadtest.cpus import default_layout, format_cpus
from loadtest.local_engine import started_engine_at, started_engines
from servers.local import LOCAL

CORES = sorted(os.sched_getaffinity(0))
needs_two_cores = pytest.mark.skipif(len(CORES) < 2, reason="needs two cores to keep apart")
PORT = 18987
URL = f"http://127.0.0.1:{PORT}"


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("RIG_STATE_DIR", str(tmp_path / "engines"))
    yield tmp_path / "engines"


@pytest.fixture
def sleeper(state: Path) -> Iterator[dict[str, object]]:
    """A live process written down as an engine on the default layout's engine cores."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    record = {"pid": process.pid, "engine": "vllm-cpu", "port": PORT, "url": URL,
              "cpus": default_layout(set(CORES))[0], "log": "-", "flags": "vllm serve --port 8000"}
    state.mkdir(parents=True)
    (state / f"{PORT}.json").write_text(json.dumps(record))
    yield record
    process.kill()
    process.wait()


def _client(*prefix: str, no_pin: bool = False, url: str = URL,
            behind: tuple[str, ...] = ()) -> tuple[str, list[int]]:
    """What a client process's pinning says, and the cores it then runs on."""
    code = ("import os, sys; from loadtest.local_engine import pin_client_beside; "
            f"print(pin_client_beside({url!r}, {no_pin}, {behind!r})); "
            "print(sorted(os.sched_getaffinity(0)))")
    out = subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, env=os.environ, check=True).stdout.splitlines()
    return out[0], json.loads(out[1])


@needs_two_cores
def test_client_moves_beside_an_engine_the_rig_started(sleeper: dict[str, object]) -> None:
    said, cores = _client()
    assert said == f"rig: beside vllm-cpu (pid {sleeper['pid']}) on {sleeper['cpus']}"
    assert cores == [CORES[0]]  # the default layout: the client alone on the lowest core


@needs_two_cores
def test_a_client_of_a_balancer_keeps_off_its_replicas_cores(sleeper: dict[str, object]) -> None:
    """A sweep's local replicas behind nginx: the client is sent to the balancer's port, and
    finds the engines by the replicas' own (--engine-urls), as it would one engine's."""
    balancer = f"http://127.0.0.1:{PORT + 1}"
    assert _client(url=balancer)[0] == "none: no engine the rig started at this host and port"
    said, cores = _client(url=balancer, behind=(f"http://127.0.0.1:{PORT + 2}", URL))
    assert said == f"rig: beside vllm-cpu (pid {sleeper['pid']}) on {sleeper['cpus']}"
    assert cores == [CORES[0]]


@needs_two_cores
def test_no_pin_leaves_the_client_where_it_was(sleeper: dict[str, object]) -> None:
    said, cores = _client(no_pin=True)
    assert said == f"shared: --no-pin, beside vllm-cpu (pid {sleeper['pid']}) on {sleeper['cpus']}"
    assert cores == CORES


@needs_two_cores
def test_a_callers_taskset_apart_from_the_engine_is_kept(sleeper: dict[str, object]) -> None:
    said, cores = _client("taskset", "-c", str(CORES[0]))
    assert said == f"apart: beside vllm-cpu (pid {sleeper['pid']}) on {sleeper['cpus']}"
    assert cores == [CORES[0]]
    assert _client("taskset", "-c", str(CORES[0]), no_pin=True) == (said, cores)


def test_an_unpinned_engine_or_none_at_all_moves_nothing(state: Path) -> None:
    assert _client() == ("none: no engine the rig started at this host and port", CORES)
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state.mkdir(parents=True)
        (state / f"{PORT}.json").write_text(json.dumps(
            {"pid": process.pid, "engine": "llamacpp-cpu", "port": PORT, "url": URL, "cpus": ""}))
        assert _client() == (f"shared: llamacpp-cpu (pid {process.pid}) may use every core", CORES)
    finally:
        process.kill()
        process.wait()


def test_state_of_an_engine_that_died_is_dropped(state: Path) -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    state.mkdir(parents=True)
    (state / f"{PORT}.json").write_text(json.dumps({"pid": process.pid, "port": PORT, "cpus": "1"}))
    assert started_engines() == [] and not (state / f"{PORT}.json").exists()


def test_only_this_hosts_loopback_engines_count(sleeper: dict[str, object]) -> None:
    assert started_engine_at(URL) == sleeper
    assert started_engine_at(f"http://localhost:{PORT}") == sleeper
    assert started_engine_at(f"http://10.1.2.3:{PORT}") is None
    assert started_engine_at(f"http://127.0.0.1:{PORT + 1}") is None


def test_list_shows_the_engines_the_rig_started(sleeper: dict[str, object]) -> None:
    listed = subprocess.run([sys.executable, "-m", "loadtest.local_engine", "list"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    cpus = sleeper["cpus"] or "all"
    assert listed == (f"vllm-cpu {URL} pid {sleeper['pid']} cpus {cpus} log -\n"
                      "  vllm serve --port 8000\n")  # the command it runs


def test_default_layout_leaves_the_client_the_first_core() -> None:
    assert default_layout({0, 1}) == ("1", "0")
    assert default_layout({2, 3, 4, 5}) == (format_cpus({3, 4, 5}), "2")
    assert default_layout({0}) == ("", "")


@needs_two_cores
@pytest.mark.engine
# The layout and the pinning are the same code for every engine: llama.cpp (seconds to start)
# stands for all. vLLM's reset through its own endpoint is checked on the suite's shared vLLM
# (tests/test_telemetry.py); a vLLM of its own here cost about a minute of CI.
@pytest.mark.parametrize("slug, reset", [("llamacpp-cpu", "reset: erased 128 slots")])
def test_local_engine_start_is_clean_by_default(slug: str, reset: str, state: Path,
                                                tmp_path: Path) -> None:
    """`start` with no layout pins the engine beside the first core; a run against it pins its
    client there by itself, empties the engine's prefix cache, and its row says both."""
    if LOCAL[slug].missing():
        pytest.skip(LOCAL[slug].missing() or "")
    port, pidfile = free_port(), tmp_path / "engine.pid"
    engine_cpus, client_cpus = default_layout(set(CORES))
    started = subprocess.run([sys.executable, "-m", "loadtest.local_engine", "start", "--engine", slug,
                              "--port", str(port), "--pidfile", str(pidfile),
                              "--log", str(tmp_path / "engine.log")],
                             cwd=REPO, capture_output=True, text=True, timeout=900)
    try:
        assert started.returncode == 0, started.stderr[-2000:]
        assert f"cores {engine_cpus}; a run against it pins its client to {client_cpus}" in started.stdout
        (record,) = started_engines()
        assert (record["engine"], record["port"], record["cpus"]) == (slug, port, engine_cpus)
        out = tmp_path / "out"
        result = run_locust("--engine", slug, "--host", f"http://127.0.0.1:{port}", "--users", "2",
                            "--requests", "4", "--max-tokens", "4", "--out", str(out))
        assert result.returncode == 0, result.stderr[-2000:]
        run = json.loads(next((out / "runs").glob("*/run.json")).read_text())
        assert run["client_pinned_by"] == f"rig: beside {slug} (pid {record['pid']}) on {engine_cpus}"
        assert "client_shares_engine_cores" not in run["warnings"]
        assert run["client_cpus"] == client_cpus
        assert run["prefix_cache_reset"].startswith(reset)
    finally:
        subprocess.run([sys.executable, "-m", "loadtest.local_engine", "stop", "--pidfile", str(pidfile)],
                       cwd=REPO, timeout=60)
    assert started_engines() == []


_JUNK = st.one_of(st.just("--"), st.text(alphabet="abc -,.x:", min_size=1, max_size=6).filter(lambda t: t.strip() != ""))
_BAD = {
    "--port": st.one_of(_JUNK, st.integers(max_value=0).map(str), st.integers(min_value=65536).map(str)),
    "--cpus": st.one_of(_JUNK, st.integers(min_value=max(CORES) + 1).map(str),
                        st.integers(min_value=1, max_value=50).map(lambda n: f"{n}-0")),
    "--timeout": st.one_of(_JUNK, st.floats(max_value=0).map(str), st.just("nan")),
}


@given(data=st.data(), option=st.sampled_from(sorted(_BAD)))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_bad_option_values_are_one_error_line(data: st.DataObject, option: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Generated bad values: exit 2 with one error line, before any engine starts."""
    from loadtest.local_engine import main
    value = data.draw(_BAD[option])
    with pytest.raises(SystemExit) as exit_:
        main(["start", "--pidfile", "/nonexistent/dir/p", f"{option}={value}"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and err.startswith("error: "), err


@pytest.mark.parametrize("words", [
    ["start", "--engine", "llamacpp-cpu", "--pidfile", "p", "--", "--threads", "1"],
    ["--engine", "llamacpp-cpu", "--pidfile", "p", "start", "--", "--threads", "1"],
])
def test_the_engines_own_flags_follow_the_double_dash_wherever_the_action_stands(words):
    from loadtest.local_engine import parse_words, parser

    args = parse_words(parser(), words)
    assert (args.action, args.engine, args.extra) == ("start", "llamacpp-cpu", ["--threads", "1"])


def test_a_pidfile_nobody_can_write_is_refused_before_any_engine_starts(capsys: pytest.CaptureFixture[str]) -> None:
    from loadtest.local_engine import main
    with pytest.raises(SystemExit) as exit_:
        main(["start", "--engine", "llamacpp-cpu", "--port", "1", "--pidfile", "/nonexistent/dir/p"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith("error: --pidfile /nonexistent/dir/p: no folder"), err
