"""scripts/calibrate.sh end to end (--quick, the real rig against the real pacer), and the two
functions a run's verdict reads: faithful_event_rate and events_per_s."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from loadtest.calibration.calibrate import (faithful_by_hosts, format_table, host_cores,
                                            split_cores)
from loadtest.calibration.limits import calibration_path, events_per_s, faithful_event_rate
from loadtest.results.files import read_runs
from rig_helpers import REPO

SCRIPT = str(REPO / "scripts" / "calibrate.sh")


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("calibration")
    result = subprocess.run([SCRIPT, "--quick", "--out", str(out)], capture_output=True, text=True,
                            timeout=300, cwd=REPO)
    return result, out


def test_quick_calibration_prints_the_table_and_writes_the_machines_file(quick):
    result, out = quick
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["procs", "users", "events/s/proc"]
    assert len([line for line in lines[2:] if line.split()[:1] == ["1"]]) == 3  # 1, 32, 256 users
    path = calibration_path(out)
    assert path.name == f"{socket.gethostname()}-{len(os.sched_getaffinity(0))}cpu.json"
    assert f"written: {path}" in result.stdout
    data = json.loads(path.read_text())
    assert [(r["processes"], r["users"]) for r in data["rows"]] == [(1, 1), (1, 32), (1, 256)]
    assert set(data["faithful_events_per_s_per_process"]) == {"1"}
    for row in data["rows"]:
        assert row["matched"] == row["requests"] == 2 * row["users"]  # every record found its answer
        assert row["ttft_err_ms"]["count"] == row["requests"]
        assert row["itl_err_ms"]["count"] == row["requests"] * 31
        assert row["faithful"] in ("yes", "no", "?")
        assert row["pacer_lateness_ms"]["count"] == row["requests"] * 32


def test_the_run_side_measure_is_read_from_the_rigs_own_row(quick):
    _, out = quick
    data = json.loads(calibration_path(out).read_text())
    rows = read_runs(Path(data["raw"]) / "runs.csv")
    assert len(rows) == 3
    for csv_row, row in zip(rows, data["rows"]):
        rate = events_per_s(csv_row)
        expected = int(csv_row["output_chunks"]) / float(csv_row["completion_time_s"])
        assert rate == pytest.approx(expected) == pytest.approx(row["events_per_s_per_process"])


def test_faithful_event_rate_reads_the_file_or_says_none(quick, tmp_path: Path):
    _, out = quick
    data = json.loads(calibration_path(out).read_text())
    rate = faithful_event_rate(calibration_path(out))
    assert rate == data["faithful_events_per_s"] and rate is not None and rate >= 0
    assert faithful_event_rate(tmp_path / "absent.json") is None


def test_faithful_event_rate_per_process_count(tmp_path: Path):
    path = tmp_path / "host-16cpu.json"
    path.write_text(json.dumps({"faithful_events_per_s": 9000.0,
                                "faithful_events_per_s_per_process": {"1": 12000.0, "2": 11000.0,
                                                                      "8": 9000.0}}))
    assert faithful_event_rate(path) == 9000.0
    assert [faithful_event_rate(path, processes=p) for p in (1, 2, 4, 8, 16)] == [
        12000.0, 11000.0, 11000.0, 9000.0, 9000.0]


def test_events_per_s_divides_by_client_processes():
    row = {"output_chunks": "8000", "output_tokens": "9000", "completion_time_s": "2",
           "processes": "4"}
    assert events_per_s(row) == 1000.0
    assert events_per_s({"output_tokens": 100, "completion_time_s": 1.0}) == 100.0
    assert events_per_s({"output_chunks": 10, "completion_time_s": None}) is None


def test_help_exits_0_and_a_bad_option_is_one_error_line():
    help_ = subprocess.run([SCRIPT, "--help"], capture_output=True, text=True, timeout=30)
    assert help_.returncode == 0 and help_.stdout.startswith("usage: scripts/calibrate.sh")
    bad = subprocess.run([SCRIPT, "--users", "0"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: ") and len(bad.stderr.strip().splitlines()) == 1


def test_the_pacer_gets_a_third_of_the_cores_and_the_client_the_rest():
    assert split_cores(list(range(16)), None, None) == ([0, 1, 2, 3, 4], list(range(5, 16)))
    assert split_cores([0, 1], None, None) == ([0], [1])
    assert split_cores([3], None, None) == ([3], [3])  # one core: shared
    assert split_cores(list(range(4)), [0], None) == ([0], [1, 2, 3])


def test_worker_hosts_get_cores_of_their_own_after_the_masters():
    assert host_cores(list(range(5, 16)), 4, 2) == ([5], [[6, 7], [8, 9], [10, 11], [12, 13]], False)
    assert host_cores([1], 2, 1) == ([1], [[1], [1]], True)  # too few: shared, and said so
    assert host_cores([4, 5, 6], 2, 2) == ([4], [[5, 6], [4, 5]], True)


def _host_row(hosts: int, users: int, per_process: float, faithful: str) -> dict:
    stats = {"p50": 0.5, "p99": 0.9, "abs_p50": 0.5, "abs_p99": 0.9}
    return {"hosts": hosts, "processes": hosts, "users": users, "events_per_s_per_process": per_process,
            "ttft_err_ms": stats, "itl_err_ms": stats, "delivery_ms": stats,
            "pacer_lateness_ms": stats, "client_cpu_max_pct": 10.0, "loop_lag_p99_ms": 1.0,
            "failed": 0, "faithful": faithful}


def test_the_table_of_worker_hosts_leads_with_hosts_and_events_in_all():
    rows = [_host_row(1, 32, 1500.0, "yes"), _host_row(1, 128, 6000.0, "no"),
            _host_row(2, 64, 1500.0, "yes"), _host_row(4, 128, 1500.0, "?")]
    lines = format_table(rows).splitlines()
    assert lines[0].split()[:4] == ["hosts", "events/s", "procs", "users"]
    assert lines[4].split()[:3] == ["2", "3,000", "2"]
    assert faithful_by_hosts(rows) == {"1": 1500.0, "2": 3000.0, "4": 0.0}


@pytest.mark.parametrize("args, message", [
    (["--worker-hosts", "1,2", "--processes", "2"], "--worker-hosts and --processes"),
    (["--cores-per-host", "2"], "--cores-per-host goes with --worker-hosts"),
])
def test_worker_hosts_options_that_do_not_go_together(args: list[str], message: str):
    bad = subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("error: ") and len(bad.stderr.strip().splitlines()) == 1
    assert message in bad.stderr
