"""The rig's distributed mode across hosts (network namespaces on one bridge: tests/net_hosts.py):
the pacing server on one host, the Locust master on another, its workers on others, as
docs/client.md tells a user to run them on separate machines."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtest.calibration.server import pacer_env
from loadtest.cli.locust import locust_command
from net_hosts import Hosts
from rig_helpers import REPO

pytestmark = pytest.mark.engine  # several Python processes a test: not the fast tier's

PACER_PORT = 8100
REQUESTS = 256


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[Hosts]:
    why = Hosts.missing()
    if why:
        pytest.skip(why)
    with Hosts(["engine", "master", "w1", "w2"]) as made:
        pacer = made.popen("engine", [sys.executable, "-m", "loadtest.calibration.pacer",
                                      "--host", "0.0.0.0", "--port", str(PACER_PORT),
                                      "--ttft-ms", "50", "--gap-ms", "10", "--tokens", "16"],
                           tmp_path / "pacer.log", REPO, env=pacer_env())
        try:
            _wait_until_answers(f"{_pacer_url(made)}/lateness", pacer, tmp_path / "pacer.log")
            yield made
        finally:
            pacer.kill()
            pacer.wait()


def test_a_run_from_workers_on_two_hosts_crosses_the_network(hosts: Hosts, tmp_path: Path):
    out = tmp_path / "results"
    master = _master(hosts, out, tmp_path)
    workers = [_worker(hosts, name, tmp_path) for name in ("w1", "w2")]
    try:
        assert master.wait(timeout=300) == 0, (tmp_path / "master.log").read_text()[-3000:]
    finally:
        _stop(workers)
    (row,) = list(csv.DictReader((out / "runs.csv").open(newline="")))
    assert (row["completed"], row["failed"], row["processes"]) == (str(REQUESTS), "0", "2")
    assert row["host"] == _pacer_url(hosts)
    (records,) = out.glob("runs/*/requests.jsonl")
    ids = [json.loads(line)["request_id"] for line in records.read_text().splitlines()]
    assert sorted(ids) == list(range(REQUESTS))  # each request sent once, from one queue
    served = _get(f"{_pacer_url(hosts)}/lateness")
    assert served["requests"] == REQUESTS and served["aborted"] == 0
    assert float(row["ttft_p50_ms"]) >= 50.0  # the server's schedule: no earlier first token


def test_a_worker_host_lost_mid_run_stops_the_run_with_its_records(hosts: Hosts, tmp_path: Path):
    out = tmp_path / "results"
    master = _master(hosts, out, tmp_path, requests=4096)
    workers = [_worker(hosts, name, tmp_path) for name in ("w1", "w2")]
    try:
        deadline = time.monotonic() + 120
        while _get(f"{_pacer_url(hosts)}/lateness")["requests"] < 64:
            assert time.monotonic() < deadline and master.poll() is None, \
                (tmp_path / "master.log").read_text()[-3000:]
            time.sleep(0.2)
        hosts.cut("w2")
        code = master.wait(timeout=120)
    finally:
        _stop([master, *workers])
    log = (tmp_path / "master.log").read_text()
    assert code == 2, log[-3000:]
    assert not (out / "runs.csv").exists() or len((out / "runs.csv").read_text().splitlines()) <= 1
    kept = list(out.glob("runs/*/requests.jsonl"))
    assert kept and kept[0].read_text().count("\n") >= 1, log[-3000:]


def _master(hosts: Hosts, out: Path, tmp_path: Path, requests: int = REQUESTS
            ) -> subprocess.Popen[bytes]:
    cmd = locust_command(host=_pacer_url(hosts), users=16,
                         rig_options=["--engine", "vllm", "--requests", str(requests),
                                      "--max-tokens", "16", "--telemetry-interval", "0",
                                      "--out", str(out)])
    return hosts.popen("master", [*cmd, "--master", "--expect-workers", "2"],
                       tmp_path / "master.log", REPO)


def _worker(hosts: Hosts, name: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    cmd = locust_command(host="", users=1)
    cmd = cmd[:cmd.index("-f") + 2] + ["--worker", "--master-host", hosts.address("master")]
    return hosts.popen(name, cmd, tmp_path / f"{name}.log", REPO)


def _pacer_url(hosts: Hosts) -> str:
    return f"http://{hosts.address('engine')}:{PACER_PORT}"


def _get(url: str) -> dict:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as response:
        return json.loads(response.read())


def _wait_until_answers(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60  # a busy machine can be slow to start a Python
    while True:
        try:
            _get(url)
            return
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
