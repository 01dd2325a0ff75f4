"""The rig's distributed mode across hosts (network namespaces on one bridge:
loadtest/calibration/hosts.py): the pacing server on one host, the Locust master on another, its
workers on others, as docs/client.md tells a user to run them on separate machines."""

from __future__ import annotations

import csv
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtest.calibration.server import pacer_env
from loadtest.client.arrivals import send_offsets_ns
from loadtest.launch.command import locust_command, worker_command
from loadtest.calibration.hosts import Hosts
from servers.llamacpp_cpu import RECIPE as LLAMACPP
from rig_helpers import REPO

pytestmark = pytest.mark.engine  # several Python processes a test: not the fast tier's

PACER_PORT = 8100
REQUESTS = 256


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[Hosts]:
    why = Hosts.missing()
    if why:
        pytest.skip(why)
    with Hosts(["engine", "master", "w1", "w2", "w3", "w4"]) as made:
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


@pytest.mark.parametrize("clock_ahead_s", [0, 86_400], ids=["same-clock", "clock-a-day-ahead"])
def test_a_run_from_workers_on_two_hosts_crosses_the_network(hosts: Hosts, tmp_path: Path,
                                                              clock_ahead_s: int):
    """Every worker's times are put on the master's clock: each host's monotonic clock counts
    from its own boot, so one a day ahead must not make the run last a day."""
    out = tmp_path / "results"
    master = _master(hosts, out, tmp_path)
    workers = [_worker(hosts, "w1", tmp_path), _worker(hosts, "w2", tmp_path, clock_ahead_s)]
    row = _finished_row(master, workers, out, tmp_path)
    assert (row["completed"], row["failed"], row["processes"]) == (str(REQUESTS), "0", "2")
    assert row["host"] == _pacer_url(hosts)
    (records,) = out.glob("runs/*/requests.jsonl")
    ids = [json.loads(line)["request_id"] for line in records.read_text().splitlines()]
    assert sorted(ids) == list(range(REQUESTS))  # each request sent once, from one queue
    served = _get(f"{_pacer_url(hosts)}/lateness")
    assert served["requests"] == REQUESTS and served["aborted"] == 0
    assert float(row["ttft_p50_ms"]) >= 50.0  # the server's schedule: no earlier first token
    seconds = float(row["completion_time_s"])
    assert 0 < seconds < 120, seconds  # 256 answers of 16 tokens at 16 users: a few seconds
    assert 0 <= float(row["clock_sync_error_ms"]) < 1000  # half a round trip on this bridge


def test_an_open_loop_schedule_holds_on_a_worker_whose_clock_is_a_day_ahead(hosts: Hosts,
                                                                            tmp_path: Path):
    """The schedule's origin reaches each worker on the master's clock, moved to its own."""
    out = tmp_path / "results"
    master = _master(hosts, out, tmp_path, requests=128, extra=["--rate", "40"])
    workers = [_worker(hosts, "w1", tmp_path), _worker(hosts, "w2", tmp_path, 86_400)]
    row = _finished_row(master, workers, out, tmp_path)
    assert row["completed"] == "128"
    # sent on schedule (40/s for 3.2 s), not all at once as if a day late, nor a day early
    assert 3.0 < float(row["completion_time_s"]) < 60, row["completion_time_s"]
    assert float(row["send_lag_p50_ms"]) < 1000, row["send_lag_p50_ms"]
    # each worker's own lateness, and the offset it measured: the one a day ahead says so
    assert float(row["send_lag_worst_worker_p99_ms"]) >= float(row["send_lag_p50_ms"])
    (run_json,) = out.glob("runs/*/run.json")
    workers = json.loads(run_json.read_text())["workers"]
    offsets = sorted(w["clock_offset_ms"] for w in workers)
    assert offsets[0] == pytest.approx(-86_400_000, abs=1000) and abs(offsets[1]) < 1000
    assert sum(w["records"] for w in workers) == 128
    assert all(w["send_lag_p99_ms"] is not None and w["clock_sync_error_ms"] is not None
               for w in workers)


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_a_bursty_schedule_reaches_the_engine_as_bursty_from_several_hosts(hosts: Hosts,
                                                                           tmp_path: Path,
                                                                           workers: int):
    """The master owns the one schedule and workers send each request at its time, so a gamma
    schedule's bursts arrive as bursts, not averaged towards Poisson as schedules split among
    workers would be: the gaps between the requests the server read (its own receive times)
    vary as much as the schedule's do."""
    requests, rate, burstiness = 256, 50.0, 0.25  # coefficient of variation of the gaps: 2
    out = tmp_path / "results"
    master = _master(hosts, out, tmp_path, requests=requests, workers=workers,
                     extra=["--rate", f"{rate:g}", "--arrival", "gamma",
                            "--burstiness", f"{burstiness:g}", "--users", "64"])
    started = [_worker(hosts, name, tmp_path) for name in ("w1", "w2", "w3", "w4")[:workers]]
    _finished_row(master, started, out, tmp_path)
    read_ns = sorted(r["read_ns"] for r in _get(f"{_pacer_url(hosts)}/requests")["requests"])
    assert len(read_ns) == requests
    schedule = send_offsets_ns(requests, rate, "gamma", 0, burstiness)
    assert _cv(read_ns) == pytest.approx(_cv(schedule), rel=0.2), (_cv(read_ns), _cv(schedule))
    assert _cv(read_ns) > 1.5  # Poisson's is 1


def _cv(times: list[int]) -> float:
    gaps = [b - a for a, b in zip(times, times[1:])]
    return statistics.pstdev(gaps) / statistics.fmean(gaps)


def test_a_time_bounded_run_across_hosts_sends_for_its_duration(hosts: Hosts, tmp_path: Path):
    """--duration with workers: the master numbers the sends and stops handing them out when the
    duration from its first hand-out has passed; the window's columns come from every worker's
    records, on the master's clock (one worker's a day ahead)."""
    out = tmp_path / "results"
    master = _master(hosts, out, tmp_path, requests=64,
                     extra=["--duration", "6", "--warmup-s", "1", "--cooldown-s", "1"])
    workers = [_worker(hosts, "w1", tmp_path), _worker(hosts, "w2", tmp_path, 86_400)]
    row = _finished_row(master, workers, out, tmp_path)
    assert (row["duration_s"], row["failed"], row["processes"]) == ("6", "0", "2")
    (records,) = out.glob("runs/*/requests.jsonl")
    sends = [json.loads(line) for line in records.read_text().splitlines()]
    assert sorted(r["request_id"] for r in sends) == list(range(len(sends)))  # numbered once
    assert len(sends) > 64  # the workload cycled: 16 users for 6 s of 0.2 s answers
    first = min(r["sent_ns"] for r in sends)
    assert max(r["sent_ns"] for r in sends) - first < 6e9 + 1e9  # none handed out after 6 s
    assert 6 <= float(row["completion_time_s"]) < 60
    assert int(row["window_sent"]) > 0 and float(row["window_output_tok_per_s"]) > 0


def test_conversations_across_hosts_keep_each_session_on_one_worker_on_the_masters_clock(
        hosts: Hosts, tmp_path: Path):
    """Sessions are the unit the master hands out: each session's turns come from one worker,
    in order, each later turn due its think time after the answer before it; with a worker a
    day ahead every time is still on the master's clock (sessions start on its one schedule)."""
    out = tmp_path / "results"
    master = _master(hosts, out, tmp_path, requests=8, extra=[
        "--api", "chat", "--workload", "conversation", "--turns", "3", "--input-len", "30",
        "--think-time", "0.2", "--rate", "4", "--users", "4",
        "--tokenizer", str(REPO / "models" / "tiny-llama")])  # 2 users a worker: both get sessions
    workers = [_worker(hosts, "w1", tmp_path), _worker(hosts, "w2", tmp_path, 86_400)]
    row = _finished_row(master, workers, out, tmp_path)
    assert (row["sessions_complete"], row["turns_sent"], row["failed"]) == ("8", "24", "0")
    (records_file,) = out.glob("runs/*/requests.jsonl")
    records = [json.loads(line) for line in records_file.read_text().splitlines()]
    assert sorted(r["request_id"] for r in records) == list(range(24))  # every turn once
    sessions: dict[int, list[dict]] = {}
    for r in records:
        sessions.setdefault(r["session_id"], []).append(r)
    assert sorted(sessions) == list(range(8))
    assert {r["worker"] for r in records} == {0, 1}
    for turns in sessions.values():
        turns.sort(key=lambda r: r["turn"])
        assert len({r["worker"] for r in turns}) == 1 and [r["turn"] for r in turns] == [1, 2, 3]
        for before, after in zip(turns, turns[1:]):  # on one clock: not a day apart
            assert 0.19e9 <= after["scheduled_ns"] - before["done_ns"] < 1e9
    firsts = sorted(t[0]["scheduled_ns"] for t in sessions.values())
    assert firsts[-1] - firsts[0] < 10e9  # 8 sessions at 4/s from one origin
    workers_json = json.loads(next(records_file.parent.glob("run.json")).read_text())["workers"]
    assert len(workers_json) == 2 and all(w["records"] > 0 for w in workers_json)


def test_open_loop_stages_across_hosts_send_the_masters_one_schedule(hosts: Hosts,
                                                                     tmp_path: Path):
    """--stages from two worker hosts, one clock a day ahead: the master runs the shape and
    numbers the sends; each stage sends its rate times its duration once, from both hosts, every
    send on the master's clock inside the stages' six seconds."""
    stages = tmp_path / "stages.yaml"
    stages.write_text("- {rate: 5, duration: 3s, arrival: constant, name: slow}\n"
                      "- {rate: 20, duration: 3s, arrival: constant, name: fast}\n")
    out = tmp_path / "results"
    master = _master(hosts, out, tmp_path, requests=8, extra=["--stages", str(stages)])
    workers = [_worker(hosts, "w1", tmp_path), _worker(hosts, "w2", tmp_path, 86_400)]
    row = _finished_row(master, workers, out, tmp_path)
    assert (row["stages"], row["processes"], row["failed"]) == ("2", "2", "0")
    (records_file,) = out.glob("runs/*/requests.jsonl")
    sends = [json.loads(line) for line in records_file.read_text().splitlines()]
    assert sorted(r["request_id"] for r in sends) == list(range(15 + 60))  # each send once
    assert {r["worker"] for r in sends} == {0, 1}
    stages_json = json.loads(next(records_file.parent.glob("run.json")).read_text())["stages"]
    assert {s["stage"]: s["sent"] for s in stages_json} == {"slow": 15, "fast": 60}
    first = min(r["scheduled_ns"] for r in sends)
    assert max(r["scheduled_ns"] for r in sends) - first < 6e9  # one schedule, not a day apart
    assert max(r["sent_ns"] for r in sends) - first < 6e9 + 2e9


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


def test_a_real_engine_on_its_own_host_answers_workers_on_two_others(tmp_path: Path):
    """llama.cpp's server (CPU) on one host, the master on another, a worker on each of two
    more: each request sent once from the one queue, every answer streamed back across the
    network, the records merged into one row; the engine's own counter saw each request."""
    why = Hosts.missing() or LLAMACPP.missing()
    if why:
        pytest.skip(why)
    requests, port = 16, 8080
    with Hosts(["engine", "master", "w1", "w2"]) as made:
        url = f"http://{made.address('engine')}:{port}"
        engine = made.popen("engine", LLAMACPP.command(port, ["--host", "0.0.0.0"]),
                            tmp_path / "engine.log", REPO, env={**os.environ, **LLAMACPP.env})
        try:
            _wait_until_answers(f"{url}/health", engine, tmp_path / "engine.log")
            out = tmp_path / "results"
            cmd = locust_command(host=url, users=4, rig_options=[
                "--engine", "llamacpp-cpu", "--requests", str(requests), "--max-tokens", "8",
                "--telemetry-interval", "0", "--out", str(out)])
            master = made.popen("master", [*cmd, "--master", "--expect-workers", "2"],
                                tmp_path / "master.log", REPO)
            workers = [_worker(made, name, tmp_path) for name in ("w1", "w2")]
            row = _finished_row(master, workers, out, tmp_path)
            metrics = urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                f"{url}/metrics", timeout=10).read().decode()
        finally:
            engine.kill()
            engine.wait()
    assert (row["completed"], row["failed"], row["processes"]) == (str(requests), "0", "2")
    assert row["host"] == url and int(row["output_tokens"]) > 0
    (records,) = out.glob("runs/*/requests.jsonl")
    sent = [json.loads(line) for line in records.read_text().splitlines()]
    assert sorted(r["request_id"] for r in sent) == list(range(requests))
    assert {r["worker"] for r in sent} == {0, 1}
    predicted = re.search(r"^llamacpp:tokens_predicted_total (\S+)", metrics, re.MULTILINE)
    assert predicted and float(predicted.group(1)) >= int(row["output_tokens"]), metrics[:800]


def test_the_calibration_drives_the_pacer_from_worker_hosts(tmp_path: Path):
    """`calibrate --worker-hosts`: the pacer, the master and each worker on a host of its own;
    every answer the pacer wrote is matched to its record, and two hosts of the same users each
    carry twice the events of one (the pacer's schedule sets the rate)."""
    if Hosts.missing():
        pytest.skip(Hosts.missing())
    done = subprocess.run([sys.executable, "-m", "loadtest.calibration.calibrate",
                           "--worker-hosts", "1,2", "--users", "8", "--requests", "2",
                           "--tokens", "16", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=REPO, env=pacer_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[0].split()[:2] == ["hosts", "events/s"]
    (written,) = tmp_path.glob("*-hosts.json")
    data = json.loads(written.read_text())
    rows = data["rows"]
    assert [(r["hosts"], r["users"]) for r in rows] == [(1, 8), (2, 16)]
    for row in rows:
        assert row["matched"] == row["requests"] == 2 * row["users"] and row["failed"] == 0
    one, two = (r["events_per_s_per_process"] * r["processes"] for r in rows)
    assert two > 1.3 * one, (one, two)
    assert set(data["faithful_events_per_s_by_hosts"]) == {"1", "2"}
    assert not (tmp_path / f"{written.stem.removesuffix('-hosts')}.json").exists()


def _finished_row(master: subprocess.Popen[bytes], workers: list[subprocess.Popen[bytes]],
                  out: Path, tmp_path: Path) -> dict[str, str]:
    """The run's one row once the master has ended with 0 (its workers stopped in any case)."""
    try:
        assert master.wait(timeout=300) == 0, (tmp_path / "master.log").read_text()[-3000:]
    finally:
        _stop(workers)
    (row,) = list(csv.DictReader((out / "runs.csv").open(newline="")))
    return row


def _master(hosts: Hosts, out: Path, tmp_path: Path, requests: int = REQUESTS,
            extra: tuple[str, ...] | list[str] = (), workers: int = 2) -> subprocess.Popen[bytes]:
    cmd = locust_command(host=_pacer_url(hosts), users=16,
                         rig_options=["--engine", "vllm", "--requests", str(requests),
                                      "--max-tokens", "16", "--telemetry-interval", "0",
                                      "--out", str(out), *extra])
    return hosts.popen("master", [*cmd, "--master", "--expect-workers", str(workers)],
                       tmp_path / "master.log", REPO)


def _worker(hosts: Hosts, name: str, tmp_path: Path, clock_ahead_s: int = 0
            ) -> subprocess.Popen[bytes]:
    """A worker on host NAME; `clock_ahead_s`: its monotonic clock that far ahead of the
    master's (a time namespace), as two machines' clocks are: each counts from its own boot."""
    cmd = worker_command(hosts.address("master"))
    if clock_ahead_s:
        cmd = ["unshare", "--time", "--monotonic", str(clock_ahead_s), "--fork", *cmd]
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
