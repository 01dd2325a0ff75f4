"""Every client process on a core of its own (loadtest/cpus.py, loadtest/client/cores.py): the
layout gives `--processes N` N cores or refuses in one line, a run beside an engine the rig
started takes the cores it lacks from that engine, and each Locust worker pins itself to one.

Fast: the layout's arithmetic on generated machines (Hypothesis), the refusals through the real
commands, the engine's move with a sleeping process as its engine (as
tests/test_clean_by_default.py does), and real Locust with --processes 2 against the pacing
server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from rig_helpers import REPO, free_port, run_locust, running_pacer

from loadtest.cpus import allowed_cpus, complete_layout, format_cpus, take_client_cores
from loadtest.local_engine import started_engines

CORES = sorted(allowed_cpus())
machines = st.sets(st.integers(0, 127), min_size=1, max_size=64)


@given(machines, st.integers(1, 70))
def test_the_default_layout_gives_a_core_a_process_or_refuses(cores: set[int], processes: int):
    import loadtest.cpus as cpus

    original = cpus.allowed_cpus
    cpus.allowed_cpus = lambda: cores  # type: ignore[assignment]
    try:
        engine, client = complete_layout(processes=processes)
    except ValueError as exc:
        assert processes > 1 and len(cores) <= processes, exc
        assert "\n" not in str(exc) and f"--processes {processes}" in str(exc)
        return
    finally:
        cpus.allowed_cpus = original  # type: ignore[assignment]
    if len(cores) == 1:  # one core, one process: nothing to keep apart
        assert (engine, client) == ("", "")
        return
    client_cores, engine_cores = set(_cores(client)), set(_cores(engine))
    assert len(client_cores) == processes and client_cores | engine_cores == cores
    assert not client_cores & engine_cores and max(client_cores) < min(engine_cores)


@given(machines.flatmap(lambda cores: st.tuples(st.just(cores), st.sets(st.sampled_from(
    sorted(cores))))), st.integers(1, 70))
@settings(max_examples=300)
def test_a_client_short_of_cores_takes_them_from_the_engine_never_its_last(
        split: tuple[set[int], set[int]], processes: int):
    cores, client = split
    engine = cores - client
    if len(client) >= processes:  # nothing to take
        assert take_client_cores(engine, client, processes) == (engine, client)
        return
    try:
        left, got = take_client_cores(engine, client, processes)
    except ValueError as exc:
        assert len(engine) <= processes - len(client)
        assert "\n" not in str(exc)
        return
    assert len(got) >= processes and left and not left & got and left | got == cores
    assert got >= client and (got == client or max(got - client) < min(left))


@pytest.mark.parametrize("args, says", [
    (["--client", "0", "--processes", "2"], "client cores 0 is 1 core for --processes 2"),
    (["--processes", str(len(CORES))], f"--processes {len(CORES)} needs {len(CORES)} cores"),
])
def test_the_layout_command_refuses_in_one_line(args: list[str], says: str):
    if len(CORES) < 2:
        pytest.skip("needs two cores")
    done = subprocess.run([sys.executable, "-m", "loadtest.cpus", *args], capture_output=True,
                          text=True, cwd=REPO, check=False)
    assert done.returncode == 2 and done.stderr.startswith(f"error: {says}"), done.stderr
    assert done.stderr.count("\n") == 1


def test_rig_run_refuses_client_cpus_fewer_than_processes():
    done = run_locust("--engine", "vllm", "--host", "http://127.0.0.1:1", "--processes", "2")
    assert done.returncode == 2  # nothing answers there; checked with the cores below
    pinned = subprocess.run(
        [sys.executable, "-m", "loadtest.cli.main", "run", "--engine", "vllm", "--host",
         "http://127.0.0.1:1", "--processes", "2", "--client-cpus", str(CORES[0])],
        capture_output=True, text=True, cwd=REPO, check=False, timeout=120)
    assert pinned.returncode == 2 and pinned.stderr.count("\n") == 1, pinned.stderr
    assert "is 1 core for --processes 2" in pinned.stderr


@pytest.fixture
def engine_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], tuple[subprocess.Popen[bytes], str]]]:
    """A sleeping process of two threads written down as an engine the rig started, pinned."""
    monkeypatch.setenv("RIG_STATE_DIR", str(tmp_path / "engines"))
    started: list[subprocess.Popen[bytes]] = []

    def start(cpus: str) -> tuple[subprocess.Popen[bytes], str]:
        code = "import threading, time; threading.Thread(target=time.sleep, args=(120,)).start(); time.sleep(120)"
        process = subprocess.Popen(["taskset", "-c", cpus, sys.executable, "-c", code],
                                   start_new_session=True)
        started.append(process)
        port = free_port()
        (tmp_path / "engines").mkdir(exist_ok=True)
        (tmp_path / "engines" / f"{port}.json").write_text(json.dumps(
            {"pid": process.pid, "engine": "vllm", "port": port, "url": f"http://127.0.0.1:{port}",
             "cpus": cpus, "flags": f"taskset -c {cpus} vllm serve"}))
        return process, f"http://127.0.0.1:{port}"

    yield start
    for process in started:
        process.kill()
        process.wait()


def _lay_out(url: str, processes: int) -> subprocess.CompletedProcess[str]:
    code = ("import os; from loadtest.local_engine import pin_client_beside; "
            f"print(pin_client_beside({url!r}, processes={processes})); "
            "print(sorted(os.sched_getaffinity(0)))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, env=os.environ, check=False)


def test_beside_an_engine_on_all_but_one_core_two_processes_are_refused_when_none_is_left(
        engine_on):
    if len(CORES) != 2:
        pytest.skip("the two-core case")
    _, url = engine_on(str(CORES[1]))
    done = _lay_out(url, 2)
    assert done.returncode != 0 and "ValueError: --processes 2 needs 2 cores" in done.stderr
    assert started_engines()[0]["cpus"] == str(CORES[1])  # the engine kept its cores


def test_beside_an_engine_two_processes_take_a_core_from_it(engine_on):
    if len(CORES) < 3:
        pytest.skip("needs three cores: one for the engine, two for the client")
    engine_cpus = format_cpus(set(CORES[1:]))
    engine, url = engine_on(engine_cpus)
    done = _lay_out(url, 2)
    assert done.returncode == 0, done.stderr
    verdict, client = done.stdout.splitlines()
    left = set(CORES[2:])
    assert json.loads(client) == CORES[:2]
    assert verdict.startswith("rig: beside vllm") and f"took {CORES[1]}" in verdict
    assert started_engines()[0]["cpus"] == format_cpus(left)
    for thread in os.listdir(f"/proc/{engine.pid}/task"):  # every thread of it moved
        assert os.sched_getaffinity(int(thread)) == left


def test_two_locust_processes_run_on_cores_of_their_own(tmp_path: Path):
    """Real Locust, --processes 2, against the pacing server: run.json's workers name their
    cores, one each, and the row's client_cpus holds both."""
    if len(CORES) < 2:
        pytest.skip("needs two cores")
    with running_pacer("--ttft-ms", "50", "--gap-ms", "5") as url:  # both workers kept busy
        done = run_locust("--engine", "vllm", "--model", "pacer", "--host", url, "--users", "8",
                          "--processes", "2", "--requests", "64", "--max-tokens", "4",
                          "--ignore-eos", "--telemetry-interval", "0", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    [run_json] = (tmp_path / "runs").glob("*/run.json")
    run = json.loads(run_json.read_text())
    cores = [w["cpus"] for w in run["workers"]]
    assert len(cores) == 2 and len(set(cores)) == 2 and all("," not in c and "-" not in c
                                                            for c in cores), cores
    assert set(_cores(run["client_cpus"])) >= {int(c) for c in cores}


def _cores(cpus: str) -> list[int]:
    from loadtest.cpus import cpu_set

    return sorted(cpu_set(cpus)) if cpus else []


def test_two_runs_with_processes_at_once_each_keep_their_own_workers(tmp_path: Path):
    """Two `--processes 2` runs on one host at the same time: each master meets its own forked
    workers on a port of its own (on Locust's default 5557 one run took the other's or hung)."""
    from loadtest.launch.command import locust_command

    with running_pacer("--ttft-ms", "20", "--gap-ms", "5") as url:
        runs = [subprocess.Popen(locust_command(host=url, users=4, processes=2, rig_options=[
            "--only-summary", "--engine", "vllm", "--model", "pacer", "--requests", "32",
            "--max-tokens", "4", "--ignore-eos", "--telemetry-interval", "0",
            "--out", str(tmp_path / name)]), cwd=REPO, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True) for name in ("a", "b")]
        try:
            outputs = [run.communicate(timeout=180)[0] for run in runs]
        finally:
            for run in runs:
                if run.poll() is None:
                    os.killpg(run.pid, 9)
    assert [run.returncode for run in runs] == [0, 0], [o[-1500:] for o in outputs]
    for name in ("a", "b"):
        [run_json] = (tmp_path / name / "runs").glob("*/run.json")
        run = json.loads(run_json.read_text())
        assert run["status"] == "complete" and len(run["workers"]) == 2, run.get("workers")


def test_the_master_port_is_the_runs_own_only_where_it_forks_its_workers():
    import configargparse

    from loadtest.launch.command import own_master_port

    def defaults(argv: list[str], environ: dict[str, str] | None = None) -> tuple[int, int]:
        parser = configargparse.ArgumentParser()
        parser.add_argument("--master-bind-port", type=int, default=5557)
        parser.add_argument("--master-port", type=int, default=5557)
        own_master_port(parser, argv, environ or {})
        options, _ = parser.parse_known_args(argv)
        return options.master_bind_port, options.master_port

    assert defaults([]) == (5557, 5557)
    assert defaults(["--worker", "--processes", "4"]) == (5557, 5557)  # its master is elsewhere
    assert defaults(["--processes", "2", "--master-bind-port", "6000"])[0] == 6000
    for argv, environ in ((["--processes", "2"], {}), (["--processes=-1"], {}),
                          ([], {"LOCUST_PROCESSES": "2"})):
        bind, port = defaults(argv, environ)
        assert bind == port != 5557
