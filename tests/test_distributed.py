"""Locust's distributed mode, as on separate hosts: one master and two workers started as
separate commands, against the pacing server. The master hands out the one fixed workload,
merges every worker's records and writes the files; the workers only send."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtest.launch.command import locust_command
from rig_helpers import REPO, free_port, records_written, running_pacer, wait_for


def _worker(port: int, log: Path) -> subprocess.Popen:
    """A worker: the master sends it the users and the rig's options."""
    cmd = locust_command(host="", users=1, headless=False,
                         rig_options=["--worker", "--master-host", "127.0.0.1",
                                      "--master-port", str(port)])
    return _start(cmd, log)


def _master(port: int, url: str, users: int, rig_options: list[str], log: Path) -> subprocess.Popen:
    cmd = locust_command(host=url, users=users, rig_options=[
        "--master", "--expect-workers", "2", "--master-bind-host", "127.0.0.1",
        "--master-bind-port", str(port), "--only-summary", "--engine", "vllm", "--model", "pacer",
        "--ignore-eos", "--telemetry-interval", "0", *rig_options])
    return _start(cmd, log)


_STARTED: list[subprocess.Popen] = []


def _start(cmd: list[str], log: Path) -> subprocess.Popen:
    process = subprocess.Popen(cmd, cwd=REPO, stdout=log.open("w"), stderr=subprocess.STDOUT,
                               start_new_session=True)
    _STARTED.append(process)
    return process


@pytest.fixture(autouse=True)
def _none_left_behind() -> Iterator[None]:
    """A test that fails half-way (a wait that times out) leaves no master or worker running."""
    yield
    while _STARTED:
        process = _STARTED.pop()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def test_a_master_and_two_workers_run_the_exact_workload_once(tmp_path: Path):
    port = free_port()
    with running_pacer("--ttft-ms", "20", "--gap-ms", "5") as url:
        first = _worker(port, tmp_path / "worker1.log")  # a worker may start first
        master = _master(port, url, 6, ["--requests", "40", "--max-tokens", "8",
                                        "--out", str(tmp_path / "out")], tmp_path / "master.log")
        second = _worker(port, tmp_path / "worker2.log")
        codes = [p.wait(120) for p in (master, first, second)]
    assert codes == [0, 0, 0], (tmp_path / "master.log").read_text()[-2000:]
    [requests] = (tmp_path / "out" / "runs").glob("*/requests.jsonl")
    records = [json.loads(line) for line in requests.read_text().splitlines()]
    assert sorted(r["request_id"] for r in records) == list(range(40))  # each exactly once
    assert {r["worker"] for r in records} == {0, 1}
    assert all(r["output_chunks"] == 8 and r["error_kind"] is None for r in records)
    with (tmp_path / "out" / "runs.csv").open(newline="") as file:
        [row] = list(csv.DictReader(file))
    assert (row["requests"], row["completed"], row["processes"], row["output_tokens"]) == (
        "40", "40", "2", "320")
    assert json.loads(next(requests.parent.glob("run.json")).read_text())["status"] == "complete"
    if Path("/proc/self/task").is_dir():  # the workers' run-queue waits reach the row
        assert float(row["client_runqueue_wait_pct"]) >= 0


def test_a_worker_lost_mid_run_stops_the_run_instead_of_hanging(tmp_path: Path):
    """Its requests in flight can never be recorded: the master says so and exits 2, keeps the
    records it has (run.json "interrupted") and adds no row."""
    port = free_port()
    with running_pacer("--ttft-ms", "20", "--gap-ms", "25") as url:
        master = _master(port, url, 4, ["--requests", "40", "--max-tokens", "40",
                                        "--out", str(tmp_path / "out")], tmp_path / "master.log")
        doomed = _worker(port, tmp_path / "worker1.log")
        survivor = _worker(port, tmp_path / "worker2.log")
        run_json = tmp_path / "out" / "runs"
        wait_for(lambda: records_written(tmp_path / "out"), "the run under way", timeout_s=60)
        doomed.kill()  # as a host that drops off the network would
        code = master.wait(60)
        survivor.wait(60)
    log = (tmp_path / "master.log").read_text()
    assert code == 2, log[-2000:]
    assert "went missing with requests in flight" in log
    assert not (tmp_path / "out" / "runs.csv").exists()
    [run] = run_json.glob("*/run.json")
    assert json.loads(run.read_text())["status"] == "interrupted"
