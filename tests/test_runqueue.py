"""The client's run-queue wait (loadtest/client/runqueue.py): schedstat read and summed over
threads from a fake /proc, empty where /proc cannot say, and in the row of a real run (no engine:
an in-test TGI server) and in the bench's reference run (the pacing server)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from loadtest.bench.client import reference
from loadtest.client.runqueue import RunQueueWait, thread_waits_ns
from loadtest.results.files import read_runs

sys.path.insert(0, str(Path(__file__).parent))
from fake_tgi import FakeTGI  # noqa: E402
from rig_helpers import run_locust, running_pacer  # noqa: E402

COLUMNS = ("client_runqueue_wait_ms", "client_runqueue_wait_pct")
LINUX_SCHEDSTAT = Path("/proc/self/task").is_dir() and any(
    (task / "schedstat").exists() for task in Path("/proc/self/task").iterdir())


def _threads(proc: Path, waits_ns: dict[str, int]) -> None:
    for tid, wait_ns in waits_ns.items():
        (proc / "task" / tid).mkdir(parents=True, exist_ok=True)
        (proc / "task" / tid / "schedstat").write_text(f"123456 {wait_ns} 7\n")


def test_each_threads_second_field_is_its_wait(tmp_path: Path):
    _threads(tmp_path, {"100": 5_000_000, "101": 2_000})
    assert thread_waits_ns(tmp_path) == {"100": 5_000_000, "101": 2_000}


def test_the_wait_is_each_threads_growth_summed_and_its_share_of_the_wall(tmp_path: Path):
    _threads(tmp_path, {"100": 1_000_000, "101": 3_000_000, "102": 9_000_000})
    waited = RunQueueWait(tmp_path)
    waited.start()
    # 100 waited 4 ms more, 101 ended (its wait leaves with it), 102 none, 103 was born with 2 ms
    (tmp_path / "task" / "101" / "schedstat").unlink()
    (tmp_path / "task" / "101").rmdir()
    _threads(tmp_path, {"100": 5_000_000, "102": 9_000_000, "103": 2_000_000})
    assert waited.stop(wall_s=0.5) == {"client_runqueue_wait_ms": 6.0,
                                       "client_runqueue_wait_pct": pytest.approx(1.2)}


def test_a_reused_thread_id_counts_nothing_rather_than_a_negative(tmp_path: Path):
    _threads(tmp_path, {"100": 9_000_000})
    waited = RunQueueWait(tmp_path)
    waited.start()
    _threads(tmp_path, {"100": 1_000_000})
    assert waited.stop(wall_s=1.0)["client_runqueue_wait_ms"] == 0.0


@pytest.mark.parametrize("proc", ["no /proc", "no schedstat", "other format"])
def test_without_schedstat_both_figures_are_empty(tmp_path: Path, proc: str):
    if proc == "no schedstat":
        (tmp_path / "task" / "100").mkdir(parents=True)
        (tmp_path / "task" / "100" / "status").write_text("Name: python\n")  # no schedstat
    elif proc == "other format":
        (tmp_path / "task" / "100").mkdir(parents=True)
        (tmp_path / "task" / "100" / "schedstat").write_text("123456\n")
    waited = RunQueueWait(tmp_path / "missing" if proc == "no /proc" else tmp_path)
    waited.start()
    assert thread_waits_ns(tmp_path / "missing") is None
    assert waited.stop(wall_s=1.0) == dict.fromkeys(COLUMNS)


@pytest.mark.skipif(not LINUX_SCHEDSTAT, reason="needs Linux schedstat")
def test_a_real_runs_row_has_the_wait(tmp_path: Path):
    with FakeTGI(prefill_s=0.0, token_s=0.001) as tgi:
        result = run_locust("--engine", "tgi", "--host", tgi.url, "--requests", "8",
                            "--max-tokens", "4", "--users", "2", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    row = read_runs(tmp_path / "runs.csv")[-1]
    wait_ms, wait_pct = (float(row[c]) for c in COLUMNS)
    assert wait_ms >= 0 and 0 <= wait_pct <= 100 * 64  # up to every thread waiting all the run


@pytest.mark.skipif(not LINUX_SCHEDSTAT, reason="needs Linux schedstat")
def test_the_benchs_reference_run_has_the_wait(tmp_path: Path):
    body = json.dumps({"model": "m", "prompt": "hi", "max_tokens": 4, "stream": True}).encode()
    with running_pacer("--ttft-ms", "5", "--gap-ms", "1") as url:
        result = reference(url + "/v1/completions", [body] * 8, users=2)
    assert result["completed"] == 8
    assert not math.isnan(result["client_runqueue_wait_ms"])
    assert 0 <= result["client_runqueue_wait_pct"] <= 100 * 64


def test_with_workers_the_most_starved_process_speaks_for_the_run():
    from loadtest.client.run import worst_process
    master = {"client_runqueue_wait_ms": 3.0, "client_runqueue_wait_pct": 0.5,
              "client_cpu_max_pct": 40.0, "client_cpu_mean_pct": 20.0, "loop_lag_max_ms": None}
    workers = [{"client_runqueue_wait_ms": 90.0, "client_runqueue_wait_pct": 9.0,
                "client_cpu_max_pct": 30.0, "loop_lag_max_ms": None},
               {"client_runqueue_wait_ms": None, "client_runqueue_wait_pct": None}]
    merged = worst_process(master, workers)
    assert (merged["client_runqueue_wait_ms"], merged["client_runqueue_wait_pct"]) == (90.0, 9.0)
    assert merged["client_cpu_max_pct"] == 40.0 and merged["client_cpu_mean_pct"] == 20.0
    assert merged["loop_lag_max_ms"] is None  # no process measured it: empty, not 0
