"""The structured workload against the real vLLM CPU engine: JSON-schema, regex and tool-call
answers, each checked and counted in the row, and the same prompts sent unconstrained.

The suite's shared vLLM (tests/conftest.py) serves tool calls as a user serving them would start
it: tests/rig_helpers.py's VLLM_TOOLS says how and why."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from loadtest.workload.answers import FAILURES
from rig_helpers import run_locust

pytestmark = pytest.mark.engine


def _run(url: str, out: Path, *options: str) -> tuple[dict[str, str], list[dict]]:
    # 8 users for the 8 requests: one batch of answers in flight, not two in turn
    result = run_locust("--engine", "vllm-cpu", "--host", url, "--api", "chat", "--users", "8",
                        "--requests", "8", "--max-tokens", "96", "--telemetry-interval", "0",
                        "--workload", "structured", "--out", str(out), *options)
    assert result.returncode == 0, result.stderr[-3000:]
    with (out / "runs.csv").open() as file:
        row = list(csv.DictReader(file))[-1]
    run = max((out / "runs").iterdir())
    return row, [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]


def test_each_constrained_answer_is_checked_and_counted(engine_url: str, tmp_path: Path):
    runs = {kind: _run(engine_url, tmp_path / kind, "--constraints", kind)
            for kind in ("json", "regex", "tools-graded")}
    bare, bare_records = _run(engine_url, tmp_path / "bare", "--constraints", "tools",
                              "--constrain", "off")
    for kind, (row, records) in runs.items():
        assert row["workload_source"] == "structured" and row["constrained"] == "True"
        assert int(row["completed"]) == 8, (kind, row["errors"])
        assert int(row["answers_checked"]) == 8
        # a graded tools task's valid answer is its grade: correct or wrong (its right call)
        verdicts = ["valid" if r["answer_check"] in ("correct", "wrong") else r["answer_check"]
                    for r in records]
        assert set(verdicts) <= {"valid", *FAILURES}, verdicts
        failures = sum(int(part.split("=")[1]) for part in row["answer_failures"].split(";") if part)
        assert int(row["answers_valid"]) == verdicts.count("valid") == 8 - failures
        assert int(row["answers_valid"]) >= 1, (kind, row["answer_failures"])
    # every regex answer fits: the constraint holds token by token and the answers are short
    assert runs["regex"][0]["answers_valid"] == "8"
    # a tool call streams no text: its fragments are output all the same (TTFT, chunks)
    tools_row, tools = runs["tools-graded"]
    assert int(tools_row["empty_answers"]) == 0 and float(tools_row["ttft_p50_ms"]) > 0
    # the tasks with one right call are graded too (3 of the 4 shipped, each asked twice)
    graded = [r for r in tools if r["prompt_id"] in ("weather", "flights", "support")]
    assert int(tools_row["answers_graded"]) == len(graded) == 6
    assert int(tools_row["answers_correct"]) == sum(r["answer_check"] == "correct" for r in graded)
    # the baseline: the same prompts, no tools sent, nothing checked
    assert bare["constrained"] == "False" and not bare.get("answers_checked")
    assert all("answer_check" not in r for r in bare_records)
    assert [r["prompt_id"] for r in bare_records] != [] and {
        r["prompt_id"] for r in bare_records} == {r["prompt_id"] for r in tools}
