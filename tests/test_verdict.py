"""A verdict on every run: the closed list of reasons, and the reconnect rule it relies on."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from fake_tgi import FakeTGI
from loadtest.results.verdict import REASONS, judge
from rig_helpers import run_locust

CLEAN = {"requests": 256, "users": 32, "completed": 256, "failed": 0, "completion_time_s": 30.0,
         "client_cpu_max_pct": 40.0, "loop_lag_p99_ms": 2.0, "ttft_mean_ms": 120.0,
         "engine_ttft_mean_ms": 60.0, "buffered_requests": 0, "reconnects": 0,
         "ignore_eos": True, "min_output_tokens": 128, "max_output_tokens": 128,
         "output_chunks": 32768, "processes": 1, "engine_running_peak": 32,
         "engine_waiting_peak": 0, "warmup": False}


def test_a_clean_row_is_valid():
    assert judge(CLEAN) == ("valid", [])


@pytest.mark.parametrize(("change", "reason"), [
    ({"failed": 3}, "failed_requests"),
    ({"client_cpu_max_pct": 97.0}, "client_overloaded"),
    ({"loop_lag_p99_ms": 45.0}, "client_overloaded"),
    # the stall seen on 2 shared cores: client TTFT mean 1,595 ms, the engine's own 42 ms
    ({"ttft_mean_ms": 1595.0, "engine_ttft_mean_ms": 42.0}, "front_end_lag"),
    ({"buffered_requests": 12}, "answers_arrived_whole"),
    ({"min_output_tokens": 40}, "unequal_work"),
    ({"engine_waiting_peak": 20}, "engine_shared"),
    ({"engine_held_peak": 40, "engine_running_peak": 32, "engine_waiting_peak": 30}, "engine_shared"),
    ({"requests": 48}, "too_few_requests"),
    ({"completion_time_s": 3.0}, "short_run"),
    ({"warmup": True}, "warmup"),
])
def test_each_reason_makes_a_run_invalid(change: dict, reason: str):
    assert judge({**CLEAN, **change}) == ("invalid", [reason])


def test_borderline_cases_stay_valid():
    # queueing inside a busy engine is the engine's own TTFT: a large but proportionate gap is fine
    assert judge({**CLEAN, "ttft_mean_ms": 2300.0, "engine_ttft_mean_ms": 2000.0})[0] == "valid"
    # uneven lengths without --ignore-eos are normalized (tok/s counts tokens) and only warned
    assert judge({**CLEAN, "ignore_eos": False, "min_output_tokens": 10})[0] == "valid"
    # no engine metrics: the front-end check cannot be made, which is not a reason by itself
    assert judge({**CLEAN, "engine_ttft_mean_ms": None})[0] == "valid"


def test_engine_held_requests_are_counted_at_one_moment():
    # seen at 128 users: 63 running + 65 waiting early on, then 128 running + 0 waiting
    row = {**CLEAN, "users": 128, "requests": 256, "engine_running_peak": 128,
           "engine_waiting_peak": 65, "engine_held_peak": 128}
    assert judge(row) == ("valid", [])


def test_past_the_calibrated_event_rate_is_marked():
    rate = CLEAN["output_chunks"] / CLEAN["completion_time_s"]
    assert judge(CLEAN, faithful_events_per_s=rate * 2) == ("valid", [])
    assert judge(CLEAN, faithful_events_per_s=rate / 2) == ("invalid", ["client_past_calibrated_rate"])


def test_reasons_are_documented_in_order():
    status, reasons = judge({**CLEAN, "failed": 1, "completion_time_s": 1.0, "buffered_requests": 1})
    assert reasons == ["failed_requests", "answers_arrived_whole", "short_run"]
    assert all(REASONS[name] for name in reasons)


def test_a_kept_alive_connection_closed_before_any_answer_is_reopened_once(tmp_path: Path):
    """The server closes each connection, unanswered, at its second request: every request is
    still measured (sent once more on a fresh connection, times from the first send), the
    reconnects are counted apart and warned of (llama.cpp's server closes after every streamed
    answer, so a reconnect alone does not make a run invalid)."""
    with FakeTGI(prefill_s=0.0, token_s=0.001, drop_second_request=True) as tgi:
        result = run_locust("--engine", "tgi", "--host", tgi.url, "--users", "4",
                            "--requests", "16", "--max-tokens", "4", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    with (tmp_path / "runs.csv").open(newline="") as file:
        [row] = list(csv.DictReader(file))
    assert (row["completed"], row["failed"]) == ("16", "0")
    assert int(row["reconnects"]) == tgi.dropped > 0
    assert "reconnects" in row["warnings"]
    [requests] = (tmp_path / "runs").glob("*/requests.jsonl")
    records = [json.loads(line) for line in requests.read_text().splitlines()]
    assert sum(r["reconnects"] for r in records) == tgi.dropped
    assert "warning: reconnects:" in result.stderr


def test_results_never_import_calibration():
    """Calibration builds on results (it reads runs' rows), never the other way round: the
    measure both use, events_per_s, lives in loadtest/results/events.py."""
    import ast

    folder = Path(__file__).resolve().parents[1] / "loadtest" / "results"
    for module in folder.glob("*.py"):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names]
        names += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        assert not [n for n in names if n.startswith("loadtest.calibration")], module.name
