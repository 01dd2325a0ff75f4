"""Run summaries from raw records, and result files that survive crashes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from loadtest.results.checks import check_run
from loadtest.results.record import RequestRecord
from loadtest.results.files import RecordWriter, append_run_row, read_records, write_json
from loadtest.results.schema import COLUMN_NAMES
from loadtest.results.summary import summarize

MS = 1_000_000


def _record(i: int, sent_ms: int, ttft_ms: int, gaps_ms: list[int], tokens: int,
            error: str | None = None) -> RequestRecord:
    sent = sent_ms * MS
    first = sent + ttft_ms * MS
    record = RequestRecord(i, "p", 0.0, sent, first_chunk_ns=first,
                           done_ns=first + sum(gaps_ms) * MS,
                           chunk_gaps_ns=[g * MS for g in gaps_ms], output_chunks=len(gaps_ms) + 1,
                           output_tokens=tokens, output_tokens_source="usage")
    if error:
        record.fail(error, "boom")
    return record


def test_summary_counts_rates_and_exact_percentiles():
    records = [_record(0, 0, 100, [10, 10], 3), _record(1, 50, 200, [30], 2),
               _record(2, 60, 10, [], 0, error="http_status")]
    row = summarize(records)
    assert (row["completed"], row["failed"], row["errors"]) == (2, 1, "http_status=1")
    assert row["completion_time_s"] == pytest.approx(0.280)  # 0 ms -> 50 + 200 + 30 ms
    assert row["output_tokens"] == 5
    assert row["output_tok_per_s"] == pytest.approx(5 / 0.280)
    assert row["ttft_p50_ms"] == pytest.approx(150)  # linear between 100 and 200
    assert row["itl_p50_ms"] == pytest.approx(10)  # pooled gaps 10, 10, 30
    assert row["e2e_p99_ms"] == pytest.approx(120 + 0.99 * (230 - 120))
    assert row["tpot_mean_ms"] == pytest.approx((10 + 30) / 2)


def test_summary_of_nothing_is_empty_not_an_error():
    row = summarize([])
    assert row["completed"] == 0 and row["output_tok_per_s"] is None and row["ttft_p50_ms"] is None


def test_checks_name_uneven_lengths_and_failures():
    row = {"failed": 1, "min_output_tokens": 10, "max_output_tokens": 128, "requests": 100,
           "users": 8, "completion_time_s": 30, "output_tokens_source": "usage"}
    assert check_run(row) == ["failed_requests", "uneven_output_lengths"]


def test_a_long_answer_that_arrived_in_one_burst_is_counted_and_warned_about():
    streamed = _record(0, 0, 100, [10] * 31, 32)  # 32 chunks over 310 ms after the first
    burst = _record(1, 0, 400, [0] * 31, 32)  # the same answer, every chunk in the same instant
    short = _record(2, 0, 400, [0] * 3, 4)  # too short to tell
    # waited long for its first token, then decoded at the engine's pace (as vLLM on CPU did
    # for the last answers of a busy run: 18.3 s, then 32 tokens 27-36 ms apart): streamed
    late = _record(3, 0, 18_300, [30] * 31, 32)
    row = summarize([streamed, burst, short, late])
    assert row["buffered_requests"] == 1
    assert "buffered_streams" in check_run({**row, "requests": 4, "users": 1})


def test_checks_name_an_engine_shared_with_another_client():
    row = {"users": 8, "requests": 64, "completion_time_s": 10, "engine_running_peak": 8,
           "engine_waiting_peak": 3}
    assert check_run(row) == ["engine_shared"]
    assert check_run({**row, "engine_waiting_peak": 0}) == []


def test_runs_csv_gains_new_columns_without_losing_old_rows(tmp_path: Path):
    path = tmp_path / "runs.csv"
    append_run_row(path, {"engine": "vllm", "users": 8, "output_tok_per_s": 123.456789})
    append_run_row(path, {"engine": "tgi", "users": 16, "gpu_energy_j": 5.5})
    with path.open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert [(r["engine"], r["users"]) for r in rows] == [("vllm", "8"), ("tgi", "16")]
    assert rows[0]["output_tok_per_s"] == "123.457" and rows[0]["gpu_energy_j"] == ""
    assert rows[1]["gpu_energy_j"] == "5.5"
    assert not list(tmp_path.glob(".runs.csv.*"))  # no temp files left behind


def test_runs_csv_columns_come_in_the_schemas_order_an_older_rigs_own_last(tmp_path: Path):
    """An older rig's column the schema no longer names (telemetry_interval_s) is kept, at the
    end; every other column in the schema's order, whatever order the row was built in."""
    path = tmp_path / "runs.csv"
    path.write_text("telemetry_interval_s,users,run_id\n2,4,old\n")
    append_run_row(path, {"warnings": "", "run_id": "new", "engine": "vllm", "users": 8})
    with path.open(newline="") as file:
        header = next(csv.reader(file))
    assert header == [*[c for c in COLUMN_NAMES if c in header], "telemetry_interval_s"]
    assert header.index("run_id") < header.index("engine") < header.index("warnings")


def test_a_torn_last_request_line_is_skipped(tmp_path: Path):
    path = tmp_path / "requests.jsonl"
    writer = RecordWriter(path, "run-1")
    writer.write(_record(0, 0, 5, [1], 2))
    writer.close()
    with path.open("a") as file:
        file.write('{"request_id": 1, "prompt_id"')  # the process died mid-write
    [record] = read_records(path)
    assert record.request_id == 0 and record.output_tokens == 2


def test_write_json_replaces_the_file_whole(tmp_path: Path):
    path = tmp_path / "run.json"
    write_json(path, {"status": "running"})
    write_json(path, {"status": "complete", "n": 1})
    assert json.loads(path.read_text()) == {"status": "complete", "n": 1}
