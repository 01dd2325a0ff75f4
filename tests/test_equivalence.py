"""Output equivalence: --keep-outputs, and a configuration compared with a baseline on the same
prompts (greedy decoding), on the real embedded engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadtest.results.equivalence import (EquivalenceError, compare_outputs, compare_runs,
                                          first_difference)
from loadtest.local_engine import LocalEngine
from rig_helpers import REPO, free_port, run_locust
from servers.local import LOCAL


def test_first_difference():
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2  # a prefix differs where it ends
    assert first_difference("abc", "abd") == 2


def test_compare_outputs_counts_matches_and_positions():
    base = {0: {"text": "a b", "token_ids": [1, 2]}, 1: {"text": "c d", "token_ids": [3, 4]},
            2: {"text": "e", "token_ids": [5]}}
    other = {0: {"text": "a b", "token_ids": [1, 2]}, 1: {"text": "c x", "token_ids": [3, 9]}}
    result = compare_outputs(base, other)
    assert (result["compared"], result["exact_match"], result["exact_match_pct"]) == (2, 1, 50.0)
    assert (result["unit"], result["first_diff_p50"], result["first_diff_min"]) == ("token", 1.0, 1)
    no_ids = {0: {"text": "a b", "token_ids": None}}
    assert compare_outputs(base, no_ids)["unit"] == "char"


def _run(engine_url: str, out: Path, *args: str) -> Path:
    """A greedy run of 6 fixed-length answers; its folder."""
    result = run_locust("--host", engine_url, "--users", "3", "--requests", "6", "--ignore-eos",
                        "--temperature", "0", "--out", str(out), *args)
    assert result.returncode == 0, result.stderr[-2000:]
    [run_dir] = (out / "runs").iterdir()
    return run_dir


@pytest.fixture(scope="module")
def baseline(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(engine_url, tmp_path_factory.mktemp("base"), "--max-tokens", "16", "--keep-outputs")


def test_outputs_are_kept_only_when_asked(baseline: Path, engine_url: str, tmp_path: Path):
    lines = [json.loads(line) for line in (baseline / "outputs.jsonl").read_text().splitlines()]
    assert [r["request_id"] for r in lines] == list(range(6))
    assert all(len(r["token_ids"]) == 16 and r["prompt_id"] for r in lines)
    plain = _run(engine_url, tmp_path, "--max-tokens", "16")
    assert not (plain / "outputs.jsonl").exists()  # off by default: the answers are the user's
    assert json.loads((plain / "run.json").read_text())["keep_outputs"] is False


def test_a_configuration_compared_with_itself_matches_100_percent(baseline: Path, engine_url: str,
                                                                  tmp_path: Path):
    again = _run(engine_url, tmp_path, "--max-tokens", "16", "--keep-outputs", "--users", "1")
    result = compare_runs(baseline, again)
    assert (result["compared"], result["exact_match_pct"], result["unit"]) == (6, 100.0, "token")
    assert result["first_diff_p50"] is None and result["greedy"]


def test_a_different_max_length_shows_its_divergence(baseline: Path, engine_url: str,
                                                     tmp_path: Path):
    shorter = _run(engine_url, tmp_path, "--max-tokens", "10", "--keep-outputs")
    result = compare_runs(baseline, shorter)
    assert (result["compared"], result["exact_match"], result["exact_match_pct"]) == (6, 0, 0.0)
    # greedy: the 10-token answers are the first 10 tokens of the 16-token ones
    assert (result["first_diff_p50"], result["first_diff_min"]) == (10.0, 10)


def test_other_prompts_are_refused(baseline: Path, engine_url: str, tmp_path: Path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "x", "prompt": "Once upon a time"}\n')
    other = _run(engine_url, tmp_path / "o", "--max-tokens", "4", "--keep-outputs",
                 "--prompts", str(prompts))
    with pytest.raises(EquivalenceError, match="other prompts"):
        compare_runs(baseline, other)
    bad = subprocess.run([sys.executable, "-m", "loadtest.results.equivalence", str(baseline),
                          str(other)], capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr
    ok = subprocess.run([sys.executable, "-m", "loadtest.results.equivalence", str(baseline),
                         str(baseline)], capture_output=True, text=True, cwd=REPO)
    assert ok.returncode == 0 and "6/6 requests match the baseline exactly (100.0%)" in ok.stdout


@pytest.mark.engine
def test_an_engine_without_token_ids_is_compared_by_text(tmp_path: Path):
    """llama.cpp's server streams text only: its answers are kept as text and compared by
    character; greedy runs of the same options match, a shorter length diverges. One user:
    llama.cpp's batched decoding is not batch-invariant (README), one request at a time is."""
    why = LOCAL["llamacpp-cpu"].missing()
    if why:
        pytest.skip(why)
    with LocalEngine(port=free_port(), log_path=tmp_path / "engine.log", engine="llamacpp-cpu") as engine:
        runs = [_run(engine.url, tmp_path / name, "--engine", "llamacpp-cpu", "--max-tokens",
                     tokens, "--keep-outputs", "--users", "1") for name, tokens in (("a", "12"), ("b", "12"), ("c", "6"))]
    lines = [json.loads(line) for line in (runs[0] / "outputs.jsonl").read_text().splitlines()]
    assert len(lines) == 6 and all(r["text"] and r["token_ids"] is None for r in lines)
    same = compare_runs(runs[0], runs[1])
    assert (same["exact_match_pct"], same["unit"]) == (100.0, "char")
    shorter = compare_runs(runs[0], runs[2])
    assert shorter["exact_match"] == 0 and shorter["unit"] == "char"
    assert shorter["first_diff_min"] > 0  # the 6-token answers are prefixes of the 12-token ones
