"""Goodput against latency targets (--slo): parsing, per-request and percentile targets, and a
real run's columns."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from loadtest.results.goodput import goodput, parse_slo
from loadtest.results.record import RequestRecord
from rig_helpers import REPO, run_locust

MS = 1_000_000


def _record(i: int, ttft_ms: float, e2e_ms: float, gaps_ms: list[float], tokens: int = 10,
            scheduled_lag_ms: float | None = None, ok: bool = True) -> RequestRecord:
    sent = 10_000 * MS + i * 100 * MS
    r = RequestRecord(i, "p", 0.0, sent, first_chunk_ns=sent + int(ttft_ms * MS),
                      done_ns=sent + int(e2e_ms * MS), chunk_gaps_ns=[int(g * MS) for g in gaps_ms],
                      output_chunks=len(gaps_ms) + 1, output_tokens=tokens)
    if scheduled_lag_ms is not None:
        r.scheduled_ns = sent - int(scheduled_lag_ms * MS)
    if not ok:
        r.fail("truncated", "x")
    return r


def test_parse_slo_canonical_order_and_percentiles():
    slo = parse_slo(" itl_ms=50, ttft_ms=500,e2e_p99_ms=2000 ")
    assert slo.text == "ttft_ms=500,itl_ms=50,e2e_p99_ms=2000"
    assert [t.percentile for t in slo.targets] == [None, None, 99.0]
    assert parse_slo("") is None


@pytest.mark.parametrize("text, message", [
    ("ttft=500", "METRIC_ms=LIMIT"),
    ("speed_ms=3", "METRIC_ms=LIMIT"),
    ("ttft_ms=fast", "must be a number"),
    ("ttft_ms=0", "above 0"),
    ("ttft_ms=1,ttft_ms=2", "twice"),
    ("ttft_ms", "METRIC_ms=LIMIT"),
])
def test_parse_slo_refuses_in_one_line(text: str, message: str):
    with pytest.raises(ValueError, match=message):
        parse_slo(text)


def test_per_request_targets_count_failures_and_use_the_schedule_in_open_loop():
    records = [
        _record(0, 100, 1000, [10, 20]),            # meets both
        _record(1, 600, 1000, [10]),                # TTFT too slow
        _record(2, 100, 1000, [80, 90]),            # mean ITL 85 > 50
        _record(3, 100, 1000, [10], ok=False),      # failed: never meets
    ]
    cols = goodput(records, 2.0, parse_slo("ttft_ms=500,itl_ms=50"))
    assert cols["slo_met_requests"] == 1 and cols["slo_met_pct"] == 25.0
    assert cols["goodput_req_per_s"] == 0.5 and cols["goodput_tok_per_s"] == 5.0
    assert cols["slo_percentiles"] == ""
    assert cols["slo_values"] == "ttft_ms=50%;itl_ms=50%"  # each target alone (a failed request meets none)
    # open loop: a request sent 450 ms late has TTFT 100 ms from its send, 550 from its schedule
    late = [_record(0, 100, 1000, [10], scheduled_lag_ms=450)]
    assert goodput(late, 1.0, parse_slo("ttft_ms=500"))["slo_met_requests"] == 0
    assert goodput(late, 1.0, parse_slo("e2e_ms=1500"))["slo_met_requests"] == 1


def test_a_missed_percentile_target_zeroes_goodput():
    records = [_record(i, 100 + i, 1000, [10]) for i in range(100)]
    met = goodput(records, 10.0, parse_slo("ttft_p50_ms=200"))
    assert met["slo_percentiles"] == "met" and met["goodput_req_per_s"] == 10.0
    missed = goodput(records, 10.0, parse_slo("ttft_p99_ms=500,ttft_p50_ms=100"))
    assert missed["slo_percentiles"] == "missed:ttft_p50_ms"
    assert missed["slo_values"] == "ttft_p50_ms=149.5;ttft_p99_ms=198.01"  # by how much
    assert missed["goodput_req_per_s"] == 0.0 and missed["slo_met_pct"] == 100.0


def test_without_slo_there_are_no_goodput_columns():
    assert goodput([_record(0, 1, 2, [])], 1.0, None) == {}


def test_bad_slo_is_one_error_line():
    result = run_locust("--slo", "ttft=500")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "--slo takes METRIC_ms=LIMIT" in errors[0], result.stderr[-1500:]


def test_a_real_run_records_goodput(engine_url: str, tmp_path: Path):
    """Closed loop on the embedded engine: one generous target every request meets, one
    impossible one none does; the row holds both runs' figures."""
    for slo in ("ttft_ms=60000,itl_ms=60000", "ttft_ms=0.001"):
        result = run_locust("--host", engine_url, "--users", "2", "--requests", "4",
                            "--max-tokens", "8", "--ignore-eos", "--slo", slo, "--out", str(tmp_path))
        assert result.returncode == 0, result.stderr[-2000:]
    with (tmp_path / "runs.csv").open(newline="") as file:
        easy, hard = list(csv.DictReader(file))
    assert (easy["slo"], easy["slo_met_requests"], easy["slo_met_pct"]) == \
        ("ttft_ms=60000,itl_ms=60000", "4", "100")
    assert float(easy["goodput_req_per_s"]) == pytest.approx(float(easy["req_per_s"]), rel=1e-3)
    assert float(easy["goodput_tok_per_s"]) == pytest.approx(float(easy["output_tok_per_s"]), rel=1e-3)
    assert (hard["slo_met_requests"], hard["goodput_req_per_s"]) == ("0", "0")
    # the report plots closed-loop goodput against users
    report = subprocess.run([sys.executable, "-m", "loadtest.report", str(tmp_path)],
                            capture_output=True, text=True, cwd=REPO)
    assert report.returncode == 0, report.stderr[-1500:]
    assert "Goodput against rate and users" in (tmp_path / "report" / "report.md").read_text()
    assert (tmp_path / "report" / "goodput.png").stat().st_size > 0


def test_sweeps_pass_slo_to_every_measured_run_and_refuse_a_bad_one(tmp_path: Path):
    """A thread sweep (and a matrix's workload.slo) gives --slo to each measured run, not the
    warm-up; a bad target is one error line before anything starts."""
    cmd = [sys.executable, "-m", "loadtest.sweep.threads", "vllm-cpu", "--users", "1,4",
           "--repeats", "1", "--requests", "8", "--out", str(tmp_path), "--dry-run"]
    dry = subprocess.run([*cmd, "--slo", "itl_ms=50,ttft_ms=500"], capture_output=True, text=True,
                         cwd=REPO)
    assert dry.returncode == 0, dry.stderr[-1500:]
    runs = [line for line in (dry.stdout + dry.stderr).splitlines() if "loadtest/engines.py" in line]
    measured = [line for line in runs if "--warmup" not in line]
    assert len(measured) == 2 and all("--slo ttft_ms=500,itl_ms=50" in line for line in measured)
    assert all("--slo" not in line for line in runs if "--warmup" in line)
    bad = subprocess.run([*cmd, "--slo", "fast"], capture_output=True, text=True, cwd=REPO)
    # checked where it enters, by the check `rig run` and the rate sweep make (issue 37)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --slo takes METRIC_ms=LIMIT")
