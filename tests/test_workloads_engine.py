"""The workload sources against the real vLLM CPU engine: a synthetic workload's prompts are the
token counts asked as the engine counts them (usage.prompt_tokens), and a shared-prefix run
sends its groups' prefixes as built."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from loadtest.workload.usage import PROMPT_TOKENS_TOLERANCE
from rig_helpers import run_locust

pytestmark = pytest.mark.engine


def _row(out: Path) -> dict[str, str]:
    with (out / "runs.csv").open() as file:
        return list(csv.DictReader(file))[-1]


def _records(out: Path) -> list[dict]:
    [run] = list((out / "runs").iterdir())
    return [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]


def test_synthetic_and_shared_prefix_prompts_are_the_token_counts_the_engine_reads(
        engine_url: str, tmp_path: Path):
    synthetic = tmp_path / "synthetic"
    result = run_locust("--engine", "vllm-cpu", "--host", engine_url, "--users", "4",
                        "--requests", "12", "--workload", "synthetic", "--input-len", "20-700",
                        "--output-len", "4", "--ignore-eos", "--telemetry-interval", "0",
                        "--out", str(synthetic))
    assert result.returncode == 0, result.stderr[-2000:]
    row = _row(synthetic)
    assert row["workload_source"] == "synthetic" and row["input_len"] == "20-700"
    assert int(row["prompt_tokens_mismatched"]) == 0, row.get("prompt_tokens_mismatch_cause")
    assert float(row["prompt_tokens_asked_mean"]) == float(row["prompt_tokens_reported_mean"])
    reported = [r["prompt_tokens"] for r in _records(synthetic)]
    assert len(reported) == 12 and all(20 - PROMPT_TOKENS_TOLERANCE <= n <= 700 for n in reported)
    assert "prompt_tokens_mismatch" not in row["warnings"]

    prefix = tmp_path / "prefix"
    result = run_locust("--engine", "vllm-cpu", "--host", engine_url, "--users", "4",
                        "--requests", "8", "--workload", "prefix", "--prefix-groups", "2",
                        "--prefix-len", "300", "--input-len", "16", "--output-len", "4",
                        "--telemetry-interval", "0", "--out", str(prefix))
    assert result.returncode == 0, result.stderr[-2000:]
    row = _row(prefix)
    assert (row["workload_source"], row["prefix_groups"], row["prefix_len"]) == ("prefix", "2", "300")
    assert {r["prompt_tokens"] for r in _records(prefix)} == {316}
    assert {r["prompt_id"].split("-")[0] for r in _records(prefix)} == {"g0", "g1"}
    assert int(row["prompt_tokens_mismatched"]) == 0
