"""--recount: the engine's output token counts against the token ids it streamed, read back with the
served model's tokenizer (loadtest/results/recount.py), on the real embedded engine."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from loadtest.client.protocols import openai
from loadtest.results.record import RequestRecord
from loadtest.results.recount import recount
from rig_helpers import run_locust, running_fault_proxy

RUN = ("--users", "2", "--requests", "8", "--max-tokens", "24", "--ignore-eos",
       "--telemetry-interval", "0", "--recount")


def _row(out: Path) -> dict[str, str]:
    with open(out / "runs.csv", newline="") as file:
        [row] = list(csv.DictReader(file))
    return row


def test_the_engines_counts_and_text_agree_with_its_token_ids(engine_url: str, tmp_path: Path):
    result = run_locust("--host", engine_url, "--out", str(tmp_path), *RUN)
    assert result.returncode == 0, result.stderr[-2000:]
    row = _row(tmp_path)
    assert row["recount"] == ("8 of 8 requests' token counts agree; 8 decode to the text "
                              "received"), row["recount"]
    assert row["recount_count_mismatches"] == "0" and row["recount_text_mismatches"] == "0"
    assert "token_count_mismatch" not in row["verdict_reasons"]
    assert "recount: 8 of 8" in result.stderr  # in the console summary too
    # the output text stays in memory: never in the request records
    lines = next((tmp_path / "runs").glob("*/requests.jsonl")).read_text().splitlines()
    assert all("output_text" not in json.loads(line) for line in lines)


def test_an_engine_that_reports_more_tokens_than_it_sent_is_invalid(engine_url: str,
                                                                    tmp_path: Path):
    with running_fault_proxy(engine_url, "--faults", "ok,miscount") as url:
        result = run_locust("--host", url, "--engine", "vllm-cpu", "--out", str(tmp_path), *RUN)
    assert result.returncode == 0, result.stderr[-2000:]  # every request itself succeeded
    row = _row(tmp_path)
    assert row["recount_count_mismatches"] == "4", row["recount"]
    assert row["verdict"] == "invalid" and "token_count_mismatch" in row["verdict_reasons"]
    assert row["recount"].startswith("4 of 8 requests' token counts agree")


def test_without_recount_the_row_says_off_and_the_request_asks_for_no_ids():
    assert recount([], "", asked=False) == {"recount": "off"}
    body = json.loads(openai.build_body("completions", "m", "hi", 4, ignore_eos=True,
                                        temperature=0.0))
    assert "return_token_ids" not in body
    asked = json.loads(openai.build_body("completions", "m", "hi", 4, ignore_eos=True,
                                         temperature=0.0, token_ids=True))
    assert asked["return_token_ids"] is True


def test_no_ids_or_no_tokenizer_is_said_not_guessed(tmp_path: Path):
    done = RequestRecord(0, "p", 0.0, 0, first_chunk_ns=1, done_ns=2, output_tokens=3)
    assert recount([done], "", asked=True)["recount"].startswith(
        "not available: the engine streamed no token ids")
    done.output_ids, done.output_text = [1, 2, 3], ["abc"]
    checked = recount([done], str(tmp_path), asked=True)  # a folder without tokenizer.json
    assert checked["recount_count_mismatches"] == 0 and checked["recount_text_mismatches"] is None
    assert "no tokenizer.json" in checked["recount"]


def test_a_chunks_ids_are_read_only_when_present():
    plain = openai.parse_line(b'data: {"choices": [{"index": 0, "text": "ab"}]}\n')
    assert plain.output and plain.token_ids is None and plain.text == "ab"  # kept only if asked
    with_ids = openai.parse_line(
        b'data: {"choices": [{"index": 0, "text": "ab", "token_ids": [7, 9]}]}\n')
    assert with_ids.token_ids == [7, 9] and with_ids.text == "ab"

