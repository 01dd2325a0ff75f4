"""A real reasoning stream through the rig: vLLM CPU with a reasoning parser, and llama.cpp with a
chat template that renders reasoning in `<think>` (its parser learns the markers from the
template), the tiny model made to reason by an answer constrained to `<think>...</think>...`
(vLLM: the task's regex; llama.cpp: its GBNF twin).

The tiny tokenizer has no `<think>` token (it is five tokens, `</think>` six), so the parsers that
look for one token id (deepseek_r1, qwen3) cannot run on it. vLLM's `hf` parser reads the
model's own `response_template` (tokenizer_config.json) and parses text, so a copy of the model
folder with a template naming `<think>` and `</think>` reasons; `enable_in_reasoning` makes the
regex hold from the first token (vLLM otherwise applies a constraint only after reasoning)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from loadtest.local_engine import LocalEngine
from servers.local import LOCAL
from rig_helpers import REPO, free_port, run_locust

pytestmark = pytest.mark.engine

TASKS = REPO / "tests" / "data" / "reasoning-regex.jsonl"  # <think>[a-z ]{16,40}</think>[a-z ]{4,20}
# the tiny model's template, with an assistant's reasoning rendered in <think>...</think>
THINK_TEMPLATE = REPO / "tests" / "data" / "think.jinja"


def _reasoning_run(engine: str, url: str, out: Path) -> tuple[dict[str, str], list[dict]]:
    """Eight reasoning requests through the rig: the row, and each request's record, every
    one checked to have reasoned first and answered after."""
    result = run_locust("--engine", engine, "--host", url, "--api", "chat",
                        "--workload", "structured", "--constraints", str(TASKS),
                        "--users", "4", "--requests", "8", "--max-tokens", "96",
                        "--telemetry-interval", "0", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    with (out / "runs.csv").open() as file:
        row = list(csv.DictReader(file))[-1]
    [run] = (out / "runs").iterdir()
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    assert int(row["completed"]) == 8 and int(row["reasoning_requests"]) == 8
    assert int(row["reasoning_unanswered"]) == 0
    for r in records:  # each stream: reasoning first, then the answer
        assert r["first_chunk_ns"] == r["first_reasoning_ns"] <= r["last_reasoning_ns"]
        assert r["last_reasoning_ns"] < r["first_answer_ns"] < r["done_ns"]
    # the first answer token comes after the reasoning: TTFA over TTFT
    assert float(row["ttfa_p50_ms"]) > float(row["ttft_p50_ms"]) == float(row["ttfr_p50_ms"])
    # neither engine counts reasoning tokens (vLLM's hf parser says 0 for answers that
    # reasoned, llama.cpp's usage has no field): none is taken or made up from chunks
    assert row["reasoning_tokens_source"] == "none" and row["reasoning_tokens"] == ""
    return row, records


def test_a_reasoning_stream_is_timed_and_counted_apart_from_its_answer(
        vllm_adapters_reasoning: str, tmp_path: Path):
    """vLLM with the `hf` parser on the copy of the tiny model whose template names the markers
    (conftest.py's vllm_adapters_reasoning, shared with tests/test_lora.py's adapters)."""
    row, records = _reasoning_run("vllm-cpu", vllm_adapters_reasoning, tmp_path / "out")
    for r in records:
        assert 1 <= r["reasoning_chunks"] < r["output_chunks"]
        assert "answer_check" not in r  # a regex the parser split is not checked
    reasoning, answer = int(row["reasoning_chunks"]), int(row["answer_chunks"])
    assert reasoning == sum(r["reasoning_chunks"] for r in records) and answer >= 8
    assert reasoning + answer == int(row["output_chunks"])
    assert float(row["switch_p50_ms"]) > 0 and float(row["reasoning_time_p50_ms"]) >= 0
    # the markers are tokens that stream no chunk: the chunks are no token count
    assert {r["reasoning_tokens"] for r in records} == {0}
    assert row["answer_tokens"] == "" and int(row["output_tokens"]) > reasoning + answer


def test_llamacpp_reasons_with_a_template_that_renders_reasoning(tmp_path: Path):
    """llama.cpp's chat parser takes its reasoning markers from the template (rendered with and
    without an assistant's reasoning_content), and `--reasoning-format deepseek` streams what is
    between them as reasoning_content; the task's grammar makes the random model write them."""
    if LOCAL["llamacpp-cpu"].missing():
        pytest.skip(LOCAL["llamacpp-cpu"].missing() or "")
    args = ["--chat-template-file", str(THINK_TEMPLATE), "--reasoning-format", "deepseek"]
    with LocalEngine(port=free_port(), extra_args=args, engine="llamacpp-cpu",
                     log_path=tmp_path / "engine.log") as engine:
        _reasoning_run("llamacpp-cpu", engine.url, tmp_path / "out")
