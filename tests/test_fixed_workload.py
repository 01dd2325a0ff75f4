"""The spine end to end: Locust drives the real vLLM CPU server with a fixed workload."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from rig_helpers import run_locust
from loadtest.results.files import read_records


def _row(out: Path) -> dict[str, str]:
    with (out / "runs.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == 1
    return rows[0]


def _records(out: Path) -> list[dict]:
    [path] = (out / "runs").glob("*/requests.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def local_run(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("local")
    result = run_locust("--engine", "vllm-cpu", "--host", engine_url, "--users", "4",
                        "--requests", "10", "--max-tokens", "16", "--ignore-eos", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    return out


def test_sends_exactly_the_requested_number_of_requests(local_run: Path):
    records = _records(local_run)
    assert sorted(r["request_id"] for r in records) == list(range(10))
    row = _row(local_run)
    assert (row["requests"], row["completed"], row["failed"]) == ("10", "10", "0")


def test_token_counts_come_from_the_server_and_add_up(local_run: Path):
    records = _records(local_run)
    assert {r["output_tokens_source"] for r in records} == {"usage"}
    assert {r["output_tokens"] for r in records} == {16}  # ignore_eos: fixed length
    assert int(_row(local_run)["output_tokens"]) == 160


def test_every_chunk_is_stamped(local_run: Path):
    for r in _records(local_run):
        assert r["sent_ns"] < r["first_chunk_ns"] <= r["done_ns"]
        assert len(r["chunk_gaps_ns"]) == r["output_chunks"] - 1
        assert r["first_chunk_ns"] + sum(r["chunk_gaps_ns"]) <= r["done_ns"]


def test_row_percentiles_match_a_recomputation_from_the_records(local_run: Path):
    records = read_records(next((local_run / "runs").glob("*/requests.jsonl")))
    row = _row(local_run)
    ttft = [r.ttft_ms for r in records]
    gaps = [g / 1e6 for r in records for g in r.chunk_gaps_ns]
    assert float(row["ttft_p50_ms"]) == pytest.approx(np.percentile(ttft, 50), rel=1e-4)
    assert float(row["ttft_p99_ms"]) == pytest.approx(np.percentile(ttft, 99), rel=1e-4)
    assert float(row["itl_p50_ms"]) == pytest.approx(np.percentile(gaps, 50), rel=1e-4)
    span_s = (max(r.done_ns for r in records) - min(r.sent_ns for r in records)) / 1e9
    assert float(row["completion_time_s"]) == pytest.approx(span_s, rel=1e-4)
    assert float(row["output_tok_per_s"]) == pytest.approx(160 / span_s, rel=1e-4)


def test_run_json_holds_metadata_and_summary(local_run: Path):
    [run_json] = (local_run / "runs").glob("*/run.json")
    run = json.loads(run_json.read_text())
    assert run["status"] == "complete"
    assert run["engine"] == "vllm-cpu" and run["model"] == "tiny-llama"
    assert run["engine_version"] == "0.32.0"
    assert len(run["workload_sha256"]) == 64 and run["model_sha256"]


def test_processes_split_the_workload_exactly(engine_url: str, tmp_path: Path):
    result = run_locust("--engine", "vllm-cpu", "--host", engine_url, "--users", "6",
                        "--processes", "2", "--requests", "21", "--max-tokens", "8",
                        "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    records = _records(tmp_path)
    assert sorted(r["request_id"] for r in records) == list(range(21))
    assert {r["worker"] for r in records} == {0, 1}
    row = _row(tmp_path)
    assert (row["requests"], row["completed"], row["processes"]) == ("21", "21", "2")


def test_warmup_runs_are_kept_out_of_runs_csv(engine_url: str, tmp_path: Path):
    result = run_locust("--engine", "vllm-cpu", "--host", engine_url, "--users", "2",
                        "--requests", "2", "--max-tokens", "4", "--warmup", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    assert not (tmp_path / "runs.csv").exists()
    assert len(_records(tmp_path)) == 2


def test_chat_api_is_measured_too(engine_url: str, tmp_path: Path):
    result = run_locust("--engine", "vllm-cpu", "--host", engine_url, "--api", "chat",
                        "--users", "2", "--requests", "4", "--max-tokens", "8", "--ignore-eos",
                        "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    assert {r["output_tokens"] for r in _records(tmp_path)} == {8}
