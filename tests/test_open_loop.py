"""Open loop (--rate): a seeded schedule, latency from scheduled and actual sends, the --users cap
and its waits, and the verdict on a run whose sends fall behind; on the real embedded engine."""

from __future__ import annotations

import csv
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from loadtest.client.arrivals import send_offsets_ns
from loadtest.client.run import workers_section
from loadtest.results.rules import SEND_LAG_LIMIT_MS
from loadtest.results.record import RequestRecord
from loadtest.results.summary import summarize, worker_send_lags
from loadtest.results.verdict import judge
from rig_helpers import REPO, first_through_the_process, run_locust


def _row(out: Path) -> dict[str, str]:
    with (out / "runs.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == 1
    return rows[0]


def _records(out: Path) -> list[dict]:
    [path] = (out / "runs").glob("*/requests.jsonl")
    return sorted((json.loads(line) for line in path.read_text().splitlines()),
                  key=lambda r: r["request_id"])


def test_schedules_are_seeded_and_shaped():
    constant = send_offsets_ns(5, 4.0, "constant")
    assert constant == [0, 250_000_000, 500_000_000, 750_000_000, 1_000_000_000]
    a, b = send_offsets_ns(2000, 10.0, "poisson", 7), send_offsets_ns(2000, 10.0, "poisson", 7)
    assert a == b and a != send_offsets_ns(2000, 10.0, "poisson", 8)
    gaps = np.diff(a) / 1e9
    assert a[0] == 0 and (gaps > 0).all()
    assert np.mean(gaps) == pytest.approx(0.1, rel=0.1)  # mean gap 1/rate
    assert np.std(gaps) == pytest.approx(0.1, rel=0.15)  # exponential: sd = mean


@pytest.mark.parametrize("args, message, locust", first_through_the_process([
    (["--rate", "0"], "--rate must be above 0"),
    (["--rate", "fast"], "--rate must be a number"),
    (["--rate", "2", "--arrival", "bursty"], "--arrival must be one of constant, poisson, gamma"),
    (["--arrival", "constant"], "give --rate too"),
]))
def test_bad_open_loop_options_are_one_error_line(args: list[str], message: str, locust):
    result = locust(*args)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr[-1500:]


def test_behind_schedule_is_a_verdict_reason_only_in_open_loop():
    row = {"requests": 64, "users": 64, "completion_time_s": 30.0, "rate": 4.0,
           "send_lag_p99_ms": 12.0}
    assert judge(row) == ("valid", [])  # 64 requests at a cap of 64 users: not too few in open loop
    assert judge({**row, "send_lag_p99_ms": 400.0}) == ("invalid", ["behind_schedule"])


def _sends(worker: int, lags_ms: list[float]) -> list[RequestRecord]:
    return [RequestRecord(request_id=i, prompt_id="p", sent_at=0.0, sent_ns=10**9 * i + round(
        lag * 1e6), scheduled_ns=10**9 * i, worker=worker) for i, lag in enumerate(lags_ms)]


def test_one_worker_behind_its_schedule_makes_the_run_invalid_where_the_pool_hides_it():
    """Three workers on time, one 200 ms late on 3% of its sends: the pooled p99 stays under
    the limit (the late sends are 0.75% of all), that worker's own p99 does not."""
    on_time = [_sends(w, [1.0] * 100) for w in range(3)]
    late = _sends(3, [1.0] * 97 + [200.0] * 3)
    records = [r for sends in (*on_time, late) for r in sends]
    row = summarize(records)
    assert row["send_lag_p99_ms"] < 50 < row["send_lag_worst_worker_p99_ms"]
    workers = worker_send_lags(records)
    assert [w["worker"] for w in workers] == [0, 1, 2, 3]
    assert [w["sends"] for w in workers] == [100] * 4
    assert workers[0]["send_lag_p99_ms"] == pytest.approx(1.0)
    verdict = judge({"requests": 400, "users": 64, "completion_time_s": 100.0, "rate": 4.0,
                     **{k: v for k, v in row.items() if k.startswith("send_lag")}})
    assert verdict == ("invalid", ["behind_schedule"])
    assert "send_lag_worst_worker_p99_ms" not in summarize(on_time[0])  # one process


def test_run_json_lists_each_workers_clock_offset_and_lateness():
    records = _sends(0, [1.0] * 10) + _sends(1, [3.0] * 10)
    reports = [{"worker": 1, "clock_offset_ms": -86_400_000.5, "clock_sync_error_ms": 0.1},
               {"worker": 0, "clock_offset_ms": 0.02, "clock_sync_error_ms": 0.1}]
    section = workers_section(records, reports)
    assert [(w["worker"], w["records"], w["clock_offset_ms"]) for w in section] == [
        (0, 10, 0.02), (1, 10, -86_400_000.5)]
    assert section[1]["send_lag_p50_ms"] == pytest.approx(3.0)
    assert workers_section(records, []) == []  # one process: no section


@pytest.fixture(scope="module")
def sustained(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 req/s, Poisson, 8-token answers: well inside what the tiny model serves on one core."""
    out = tmp_path_factory.mktemp("sustained")
    result = run_locust("--host", engine_url, "--users", "16", "--requests", "24",
                        "--max-tokens", "8", "--ignore-eos", "--rate", "4", "--arrival", "poisson",
                        "--arrival-seed", "3", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    return out


def test_a_sustained_poisson_run_follows_its_schedule(sustained: Path):
    records, row = _records(sustained), _row(sustained)
    assert [r["request_id"] for r in records] == list(range(24))  # each sent once
    origin = records[0]["scheduled_ns"]
    planned = send_offsets_ns(24, 4.0, "poisson", 3)
    assert [r["scheduled_ns"] - origin for r in records] == planned  # the seeded schedule
    lags_ms = [(r["sent_ns"] - r["scheduled_ns"]) / 1e6 for r in records]
    assert min(lags_ms) >= 0 and np.median(lags_ms) < 5, lags_ms  # sent on time
    assert all(r["cap_wait_ns"] == 0 for r in records)  # the cap was never full
    for r in records:  # from the schedule = from the send + the lag
        assert r["ttft_sched_ms"] == pytest.approx(r["ttft_ms"] + (r["sent_ns"] - r["scheduled_ns"]) / 1e6)
    assert (row["rate"], row["arrival"], row["arrival_seed"]) == ("4", "poisson", "3")
    assert float(row["ttft_sched_p50_ms"]) >= float(row["ttft_p50_ms"])
    # The row's send lag is the records', and past the limit it is the verdict's reason: on a
    # host starved mid-run (other work on its cores: one send 427 ms late in a CI run) the rig
    # says its schedule slipped rather than pass it as kept.
    assert float(row["send_lag_p99_ms"]) == pytest.approx(np.percentile(lags_ms, 99), rel=0.05, abs=0.5)
    late = float(row["send_lag_p99_ms"]) > SEND_LAG_LIMIT_MS
    assert ("behind_schedule" in row["verdict_reasons"]) == late, (row["send_lag_p99_ms"], lags_ms)
    # 24 requests at a cap of 16 users: not "too few" in open loop, where users only cap
    assert "too_few_requests" not in row["verdict_reasons"] + row["warnings"]


def _window_medians(values: np.ndarray) -> list[float]:
    """Medians of requests 4-11, 12-19 and 20-27: those after the first wave, in send order."""
    return [float(np.median(values[start:start + 8])) for start in (4, 12, 20)]


def test_a_rate_the_engine_cannot_sustain_shows_growing_queueing(engine_url: str, tmp_path: Path):
    """200 req/s of 32-token answers with at most 4 in flight: requests wait for the cap, and
    their latency from the schedule grows through the run while from the send it does not."""
    result = run_locust("--host", engine_url, "--users", "4", "--requests", "32",
                        "--max-tokens", "32", "--ignore-eos", "--rate", "200", "--arrival",
                        "constant", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    records, row = _records(tmp_path), _row(tmp_path)
    assert [r["request_id"] for r in records] == list(range(32))
    sched = np.array([r["ttft_sched_ms"] for r in records])
    sent = np.array([r["ttft_ms"] for r in records])
    last = slice(24, 32)
    # Queueing grows all along, judged on medians of windows of 8: one TTFT spike of a shared
    # host (a request 1.2 s late amid ones at 0.1-0.4 s) must not decide, as it did a correlation.
    grows = _window_medians(sched)
    assert grows[0] < grows[1] < grows[2] and grows[2] > 2 * grows[0], sched
    # the growth is the wait before the send, not the engine's own time
    waits = _window_medians(sched - sent)
    assert waits[0] < waits[1] < waits[2], sched - sent
    assert np.median(sent[last]) < 0.5 * np.median(sched[last]), (sent, sched)
    assert sum(r["cap_wait_ns"] > 0 for r in records) >= 24  # found the cap full
    assert int(row["capped_requests"]) >= 24
    assert float(row["send_lag_p99_ms"]) > 500
    assert row["verdict"] == "invalid" and "behind_schedule" in row["verdict_reasons"]
    assert "behind_schedule" in result.stderr  # said in the console summary


def test_open_loop_across_processes_sends_each_request_once(engine_url: str, tmp_path: Path):
    result = run_locust("--host", engine_url, "--users", "8", "--processes", "2",
                        "--requests", "16", "--max-tokens", "8", "--ignore-eos", "--rate", "6",
                        "--arrival", "constant", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    records = _records(tmp_path)
    assert [r["request_id"] for r in records] == list(range(16))
    assert len({r["worker"] for r in records}) == 2  # both processes sent
    origin = min(r["scheduled_ns"] for r in records)
    offsets = np.array([r["scheduled_ns"] - origin for r in records])
    # one origin for both processes, each on its own reading of the clocks: within 1 ms
    assert np.abs(offsets - send_offsets_ns(16, 6.0, "constant")).max() < 1_000_000
    lags_ms = [(r["sent_ns"] - r["scheduled_ns"]) / 1e6 for r in records]
    assert np.median(lags_ms) < 10 and max(lags_ms) < 100, lags_ms  # on time, a shared host aside


def _sweep(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / "scripts" / "sweep_rate.sh"), *args], capture_output=True,
                          text=True, timeout=600, cwd=REPO)


@pytest.mark.parametrize("args, message", [
    (["vllm-cpu", "--rates", "0,2"], "--rates must be numbers above 0"),
    (["vllm-cpu", "--users", "4,8"], "--users must be a positive integer, got '4,8'"),
    (["vllm-cpu", "--slo", "fast"], "--slo takes METRIC_ms=LIMIT"),
    (["nope"], "unknown engine 'nope'"),
])
def test_rate_sweep_refuses_bad_options_in_one_line(args: list[str], message: str):
    result = _sweep(*args)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr[-1500:]


def test_rate_sweep_finds_the_knee_and_reports_goodput(engine_url: str, tmp_path: Path):
    """Two rates on the embedded engine: one it sustains, one far past it (4 in flight at most);
    the sweep stops there, names the knee, and the report holds the open-loop table, goodput and
    the outputs compared (every run keeps them)."""
    # 1 request/s: what the tiny model sustains on a busy host too (3/s saturated a host whose
    # load average was 4-8 on its 2 cores, issue 38)
    result = _sweep("vllm-cpu", "--host", engine_url, "--rates", "1,300,600", "--users", "4",
                    "--requests", "16", "--max-tokens", "16", "--ignore-eos", "--arrival",
                    "constant", "--slo", "ttft_ms=400", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    rates_table = result.stdout.split("Output equivalence")[0]
    lines = [line for line in rates_table.splitlines() if line.startswith("| vllm-cpu")]
    assert [line.split("|")[3].split()[0] for line in lines] == ["1", "300"]  # stopped at 300
    assert "saturated" in lines[1] and "saturated" not in lines[0]
    assert "behind_schedule" in lines[1]
    assert "users cap 4: knee at" in result.stdout
    report = (tmp_path / "report-rates-vllm-cpu" / "report.md").read_text()
    assert "## Open loop: offered rate" in report and "goodput.png" in report
    # every run kept its 16 answers and they were compared; how many are identical is not asked:
    # vLLM's greedy answers depend on which requests shared a batch, which is timing (15/16 at
    # 300 req/s on a host held to half its CPU, issue 38)
    assert "## Output equivalence" in report, report
    equivalence = report.split("## Output equivalence")[1]
    assert re.search(r"\| \d+/16 \|", equivalence), equivalence
