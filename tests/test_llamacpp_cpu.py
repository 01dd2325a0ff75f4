"""llama.cpp's real llama-server (llamacpp-cpu) as a local process, driven by the rig.

Needs scripts/build_llamacpp.sh's binary and models/tiny-llama.gguf (skipped, with the reason,
where they are missing). The tokenizer check also needs .venv-vllm (transformers).
"""

from __future__ import annotations

import csv
import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtest.local_engine import LocalEngine
from rig_helpers import REPO, free_port, run_locust
from servers.local import LOCAL
from servers.vllm_cpu import ENGINE_PYTHON, TINY_MODEL

PROMPT_FILES = sorted((REPO / "loadtest" / "prompts").glob("*.jsonl"))
# Spaces, newlines, digits, contractions, emoji, CJK: where GPT-2-style pre-tokenizers differ.
HARD_TEXT = ("\n \n\n \t\t 3 33 333 3333 3.3 3...3 I've 'RE you sure? We'Ve a'lL "
             "🚀 (normal) 😶\u200d🌫️ 我想在apple工作1314151天 нещо ------=======  trailing  ")


def _prompts() -> dict[str, str]:
    prompts = {"hard-text": HARD_TEXT}
    for path in PROMPT_FILES:
        for line in path.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            prompts[f"{path.stem}/{item['id']}"] = item["prompt"]
    return prompts


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEngine]:
    why = LOCAL["llamacpp-cpu"].missing()
    if why:
        pytest.skip(why)
    log = tmp_path_factory.mktemp("llamacpp") / "engine.log"
    with LocalEngine(port=free_port(), log_path=log, engine="llamacpp-cpu") as running:
        yield running


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def _hf_ids(prompts: dict[str, str]) -> dict[str, list[int]]:
    if not ENGINE_PYTHON.exists():
        pytest.skip(f"no {ENGINE_PYTHON} (transformers) to tokenize with: run scripts/install.sh")
    code = ("import json, sys; from transformers import AutoTokenizer; "
            "tok = AutoTokenizer.from_pretrained(sys.argv[1]); prompts = json.load(sys.stdin); "
            "print(json.dumps({k: tok.encode(v) for k, v in prompts.items()}))")
    run = subprocess.run([str(ENGINE_PYTHON), "-c", code, str(TINY_MODEL)], input=json.dumps(prompts),
                         capture_output=True, text=True, check=False, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_the_gguf_tokenizes_every_prompt_like_the_hf_tokenizer(engine: LocalEngine) -> None:
    prompts = _prompts()
    hf = _hf_ids(prompts)
    gguf = {k: _post(f"{engine.url}/tokenize", {"content": v, "add_special": True})["tokens"]
            for k, v in prompts.items()}
    assert {k: v for k, v in gguf.items() if v != hf[k]} == {}
    assert all(hf.values()) and len(gguf) == sum(len(p.read_text().splitlines()) for p in PROMPT_FILES) + 1


def _run(engine: LocalEngine, out: Path, *args: str) -> tuple[dict[str, str], list[dict]]:
    result = run_locust("--engine", "llamacpp-cpu", "--host", engine.url, "--users", "8",
                        "--max-tokens", "32", "--ignore-eos", "--out", str(out), *args)
    assert result.returncode == 0, result.stderr[-3000:]
    with (out / "runs.csv").open(newline="") as file:
        (row,) = list(csv.DictReader(file))
    [path] = (out / "runs").glob("*/requests.jsonl")
    return row, [json.loads(line) for line in path.read_text().splitlines()]


def test_every_request_gets_exactly_max_tokens_counted_by_usage(engine: LocalEngine, tmp_path: Path) -> None:
    row, records = _run(engine, tmp_path, "--requests", "32")
    assert (row["requests"], row["completed"], row["failed"]) == ("32", "32", "0"), row
    assert {r["output_tokens"] for r in records} == {32}
    assert {r["output_tokens_source"] for r in records} == {"usage"}
    assert {r["finish_reason"] for r in records} == {"length"}
    assert int(row["output_tokens"]) == 32 * 32


def test_prompt_token_counts_match_the_hf_tokenizer(engine: LocalEngine, tmp_path: Path) -> None:
    _, records = _run(engine, tmp_path, "--requests", "9", "--prompts", "mixed")
    prompts = {k.split("/", 1)[1]: v for k, v in _prompts().items() if k.startswith("mixed/")}
    hf = _hf_ids(prompts)
    assert {r["prompt_id"]: r["prompt_tokens"] for r in records} == {k: len(v) for k, v in hf.items()}


def test_chat_gets_exactly_max_tokens_too(engine: LocalEngine, tmp_path: Path) -> None:
    row, records = _run(engine, tmp_path, "--requests", "8", "--api", "chat")
    assert (row["completed"], row["failed"]) == ("8", "0"), row
    assert {(r["output_tokens"], r["output_tokens_source"]) for r in records} == {(32, "usage")}
