"""Sweeps for real on the embedded vLLM CPU engine: the table, the runs.csv rows, resume, survival.

The thread sweep drives the session's engine (tests/conftest.py) with --host; the flag sweep
starts and stops its own local engines (one at a time), one of which cannot start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from loadtest.results.files import read_runs
from servers.local import LOCAL
from rig_helpers import VLLM_EAGER, VLLM_QUICK_ENV, records_written, streams_at_once, wait_for

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.engine


def sweep(*args: str, timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadtest.sweep", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=timeout_s)


def test_thread_sweep_table_rows_and_resume(engine_url: str, tmp_path: Path) -> None:
    args = ("threads", "vllm-cpu", "--host", engine_url, "--users", "1,8", "--repeats", "2",
            "--requests", "16", "--max-tokens", "16", "--ignore-eos", "--flags=--max-num-seqs=256",
            "--out", str(tmp_path))
    first = sweep(*args)
    assert first.returncode == 0, first.stderr[-3000:]
    table = first.stdout
    assert "warmed up before measuring: 16 requests at 8 users" in table
    rows = [line.split() for line in table.splitlines() if line.split()[:1] in (["1"], ["8"])]
    assert [r[0] for r in rows] == ["1", "8"] and all(r[1] == "2" for r in rows)  # 2 runs each
    assert "the smallest user count whose mean output tok/s is within 5% of the best" in table
    runs = read_runs(tmp_path / "runs.csv")
    # a user count with an invalid run (runs this short are short_run on most hosts) says so and
    # why, and is never fastest or knee; where one counts, one is each
    invalid = {r["users"]: r["verdict_reasons"] for r in runs if r["verdict"] == "invalid"}
    for row in rows:
        assert ("invalid:" in " ".join(row)) == (row[0] in invalid), (row, invalid)
    counted = [row for row in rows if row[0] not in invalid]
    assert sum("*" in r for r in rows) == sum("knee" in " ".join(r) for r in rows) == min(1, len(counted))
    assert all("*" not in row and "knee" not in " ".join(row) for row in rows if row[0] in invalid)
    assert sorted((r["users"], r["repeat"]) for r in runs) == [("1", "1"), ("1", "2"), ("8", "1"), ("8", "2")]
    assert {r["tag"] for r in runs} == {"threads-vllm-cpu"} and {r["flags"] for r in runs} == {"--max-num-seqs=256"}
    assert all(r["completed"] == "16" and r["output_tokens"] == "256" for r in runs)
    state = json.loads((tmp_path / "sweeps/threads-vllm-cpu/sweep.json").read_text())
    assert state["status"] == "complete"
    assert {c["status"] for c in state["cells"].values()} == {"ok"}
    assert state["configs"]["vllm-cpu"]["warmup"]["exit_code"] == 0

    again = sweep(*args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.count("skip vllm-cpu/") == 4 and "warm-up" not in again.stderr
    assert len(read_runs(tmp_path / "runs.csv")) == 4  # nothing measured twice
    assert rows == [line.split() for line in again.stdout.splitlines() if line.split()[:1] in (["1"], ["8"])]


def test_flag_sweep_local_engines_survives_a_bad_one_and_resumes(tmp_path: Path) -> None:
    """llama.cpp's server: a configuration starts in a second (vLLM: a minute each, four
    times); the sweep's starts, failures and resume are the same for every local engine."""
    why = LOCAL["llamacpp-cpu"].missing()
    if why:
        pytest.skip(why)
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "name: seqs\nworkload: {prompts: mixed, requests: 32, max_tokens: 16, ignore_eos: true}\n"
        "users: [16]\nrepeats: 1\nwarmup_requests: 8\nhealth_timeout_s: 600\nengines:\n"
        "  - engine: llamacpp-cpu\n    launch: local\n    settings: {EXTRA_ARGS: --no-such-flag}\n"
        "  - engine: llamacpp-cpu\n    launch: local\n    sweep: {MAX_CONCURRENT_REQUESTS: [1, 16]}\n")
    first = sweep("flags", str(matrix), "--out", str(tmp_path / "out"), timeout_s=600)
    assert first.returncode == 1, first.stderr[-3000:]  # one configuration failed, recorded
    state = json.loads((tmp_path / "out/sweeps/seqs/sweep.json").read_text())
    bad = state["configs"]["llamacpp-cpu"]
    assert bad["status"] == "failed" and "engine exited" in bad["reason"]
    assert "no-such-flag" in bad["log_tail"]
    assert {k: v["status"] for k, v in state["configs"].items()} == {
        "llamacpp-cpu": "failed", "llamacpp-cpu-parallel1": "ok", "llamacpp-cpu-parallel16": "ok"}
    runs = read_runs(tmp_path / "out/runs.csv")
    assert sorted(r["flags"] for r in runs) == ["MAX_CONCURRENT_REQUESTS=1", "MAX_CONCURRENT_REQUESTS=16"]
    # sixteen slots stream many answers at once, one slot few (not "faster": issue 38); by the
    # client's stamps one slot's answers still overlapped 2-3 (the container's, at full speed)
    streams = {r["flags"]: streams_at_once(Path(r["run_dir"]) / "requests.jsonl") for r in runs}
    assert 2 * streams["MAX_CONCURRENT_REQUESTS=1"] < streams["MAX_CONCURRENT_REQUESTS=16"], streams
    assert "FAILED: engine exited" in first.stdout
    assert "completion time by configuration" in first.stdout

    again = sweep("flags", str(matrix), "--out", str(tmp_path / "out"), timeout_s=600)
    assert again.stderr.count("skip llamacpp-cpu-parallel") == 2
    assert "start llamacpp-cpu-parallel" not in again.stderr  # measured: never started again
    assert "start llamacpp-cpu:" in again.stderr  # the failed one is tried again
    assert len(read_runs(tmp_path / "out/runs.csv")) == 2


def test_interrupted_sweep_stops_its_engine(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "loadtest.sweep", "threads", "vllm-cpu", "--users", "4",
           "--repeats", "1", "--requests", "8", "--max-tokens", "8", "--out", str(tmp_path)]
    process = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    line = process.stderr.readline()
    assert line.startswith("start vllm-cpu: "), line
    port = line.split("--port ")[1].split()[0]
    wait_for(lambda: _engine_processes(port), "the engine started", timeout_s=60)
    wait_for(lambda: (tmp_path / "sweeps/threads-vllm-cpu/sweep.json").exists(),
             "the sweep wrote its state")
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "interrupted: engine stopped" in err
    assert not _engine_processes(port)
    state = json.loads((tmp_path / "sweeps/threads-vllm-cpu/sweep.json").read_text())
    assert state["status"] == "interrupted"


def _engine_processes(port: str) -> list[int]:
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if "--port" in cmdline and port in cmdline and proc.info["pid"] != os.getpid():
            found.append(proc.info["pid"])
    return found


def test_engine_not_healthy_in_time_is_recorded_and_stopped(tmp_path: Path) -> None:
    result = sweep("threads", "vllm-cpu", "--users", "2", "--repeats", "1", "--requests", "4",
                   "--health-timeout", "3", "--out", str(tmp_path), timeout_s=300)
    assert result.returncode == 1, result.stderr[-3000:]  # recorded, not refused
    port = result.stderr.split("--port ")[1].split()[0]
    assert not _engine_processes(port)
    state = json.loads((tmp_path / "sweeps/threads-vllm-cpu/sweep.json").read_text())
    config = state["configs"]["vllm-cpu"]
    assert config["status"] == "failed" and config["reason"] == "engine not healthy after 3 s"
    assert config["log_tail"]
    (cell,) = state["cells"].values()
    assert cell["status"] == "failed" and "not healthy" in cell["reason"]
    assert "FAILED: engine not healthy after 3 s" in result.stdout


def test_engine_crash_mid_run_fails_its_cells_and_the_sweep_goes_on(tmp_path: Path) -> None:
    # 400 requests of 64 tokens: one user is far from done when the first answer is in (the kill);
    # each one left is sent after the kill and fails at once (4000 took 4 s to fail, 400 1.5 s)
    cmd = [sys.executable, "-m", "loadtest.sweep", "threads", "vllm-cpu", "--users", "1,2",
           "--repeats", "1", "--requests", "400", "--max-tokens", "64", "--warmup-requests", "0",
           "--run-timeout", "300", "--set", f"EXTRA_ARGS={VLLM_EAGER}", "--out", str(tmp_path)]
    process = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, **VLLM_QUICK_ENV})
    assert process.stderr is not None
    port = process.stderr.readline().split("--port ")[1].split()[0]
    for line in process.stderr:
        if line.startswith("run vllm-cpu/u1-r1"):
            break
    wait_for(lambda: records_written(tmp_path), "the measured run answered a request")
    killed = _engine_processes(port)
    for pid in killed:  # the sweep's own engine (its API server alone), by its pid
        os.kill(pid, signal.SIGKILL)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 1, err
    state = json.loads((tmp_path / "sweeps/threads-vllm-cpu/sweep.json").read_text())
    config = state["configs"]["vllm-cpu"]
    assert config["status"] == "failed" and config["reason"].startswith("engine stopped during u1-r1")
    cells = {c["dir"]: c for c in state["cells"].values()}
    assert cells["vllm-cpu/u1-r1"]["status"] == "failed" and "engine exited" in cells["vllm-cpu/u1-r1"]["reason"]
    assert cells["vllm-cpu/u2-r1"] == {**cells["vllm-cpu/u2-r1"], "status": "failed",
                                       "reason": "engine stopped before this cell"}
    assert state["status"] == "complete" and not _engine_processes(port)
    # nothing the API server started outlives it (vLLM's EngineCore is in its process group)
    assert not [p.pid for p in psutil.process_iter() if _group_of(p) in killed]


def _group_of(process: psutil.Process) -> int | None:
    try:
        return os.getpgid(process.pid)
    except (ProcessLookupError, PermissionError):
        return None


def test_configurations_started_together_take_turns_without_restarts(tmp_path: Path) -> None:
    """`interleave_repeats: together`: every configuration started once, before any run; the
    runs alternate configuration by configuration, repeat 1 of each before any repeat 2 (which
    goes in the reverse order); one that cannot start fails alone."""
    why = LOCAL["llamacpp-cpu"].missing()
    if why:
        pytest.skip(why)
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "name: turns\nworkload: {prompts: mixed, requests: 16, max_tokens: 8, ignore_eos: true}\n"
        "users: [2, 4]\nrepeats: 2\ninterleave_repeats: together\nwarmup_requests: 4\n"
        "health_timeout_s: 600\nengines:\n"
        "  - engine: llamacpp-cpu\n    launch: local\n    sweep: {MAX_CONCURRENT_REQUESTS: [2, 4]}\n"
        "  - engine: llamacpp-cpu\n    launch: local\n    settings: {EXTRA_ARGS: --no-such-flag}\n")
    result = sweep("flags", str(matrix), "--out", str(tmp_path / "out"), timeout_s=600)
    assert result.returncode == 1, result.stderr[-3000:]  # the bad one failed, recorded
    starts = [line for line in result.stderr.splitlines() if line.startswith("start ")]
    assert len(starts) == 3, result.stderr  # each once, all before the first run
    assert result.stderr.index("starting 3 configuration(s) together") < result.stderr.index("\nrun ")
    ports = [line.split("--port ")[1].split()[0] for line in starts]
    assert len(set(ports)) == 3
    runs = read_runs(tmp_path / "out/runs.csv")
    order = [(r["repeat"], r["users"], r["flags"]) for r in runs]
    assert order == [(rep, users, f"MAX_CONCURRENT_REQUESTS={slots}")
                     for rep, turn in (("1", (2, 4)), ("2", (4, 2)))  # repeat 2 in reverse
                     for users in ("2", "4") for slots in turn]
    state = json.loads((tmp_path / "out/sweeps/turns/sweep.json").read_text())
    assert {k: v["status"] for k, v in state["configs"].items()} == {
        "llamacpp-cpu-parallel2": "ok", "llamacpp-cpu-parallel4": "ok", "llamacpp-cpu": "failed"}
    assert "no-such-flag" in state["configs"]["llamacpp-cpu"]["log_tail"]
    assert result.stdout.startswith("sweep turns") and "configurations started together" in result.stdout
    assert not any(_engine_processes(port) for port in ports)
