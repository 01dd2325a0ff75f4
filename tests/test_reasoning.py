"""Reasoning streams, fast: each engine's reasoning field read apart from the answer (vLLM's
`reasoning`, SGLang's and llama.cpp's `reasoning_content`), tool-call fragments read as output,
the engine's reasoning count checked, and the row's reasoning figures from known records.
The real stream through the rig: tests/test_reasoning_engine.py."""

from __future__ import annotations

import json

import pytest

from loadtest.client.protocols import ProtocolError, StreamEvent
from loadtest.client.protocols import openai
from loadtest.results.reasoning import summarize_reasoning
from loadtest.results.record import RequestRecord
from loadtest.results.schema import BY_NAME


def chunk(delta: dict, finish: str | None = None, **extra) -> bytes:
    return b"data: " + json.dumps({"object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": delta, "finish_reason": finish}], **extra}).encode() + b"\n"


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_a_reasoning_delta_is_output_apart_from_the_answer(field: str):
    event = openai.parse_line(chunk({field: " so"}))
    assert event.output and event.reasoning == " so" and event.text is None


def test_a_chunk_at_the_switch_carries_both_and_plain_content_is_as_before():
    both = openai.parse_line(chunk({"reasoning": "done", "content": "Yes"}))
    assert both.output and (both.reasoning, both.text) == ("done", "Yes")
    assert openai.parse_line(chunk({"content": "Hi"})) == StreamEvent(output=True, text="Hi")
    role = openai.parse_line(chunk({"role": "assistant", "content": ""}))
    assert not role.output and role.reasoning is None
    assert not openai.parse_line(chunk({"reasoning": None, "content": None})).output


def test_tool_call_fragments_are_output_and_kept_as_sent():
    calls = [{"index": 0, "id": "c0", "type": "function",
              "function": {"name": "get_weather", "arguments": "{\""}}]
    event = openai.parse_line(chunk({"tool_calls": calls}))
    assert event.output and event.tool_calls == calls and event.text is None


@pytest.mark.parametrize("delta, field", [({"reasoning": 3}, "reasoning"),
                                          ({"reasoning_content": ["a"]}, "reasoning_content"),
                                          ({"tool_calls": {"index": 0}}, "tool_calls"),
                                          ({"tool_calls": ["x"]}, "tool_calls")])
def test_a_reasoning_or_tool_field_of_the_wrong_type_is_a_protocol_error(delta: dict, field: str):
    with pytest.raises(ProtocolError, match=field):
        openai.parse_line(chunk(delta))


@pytest.mark.parametrize("details, count, flaw", [
    ({"reasoning_tokens": 12}, 12, None), ({"reasoning_tokens": 0}, 0, None),
    ({}, None, None), (None, None, None),
    ({"reasoning_tokens": -1}, None, "reasoning_tokens"), ({"reasoning_tokens": "9"}, None, "reasoning_tokens"),
    ("many", None, "completion_tokens_details"),
])
def test_the_engines_reasoning_count_is_read_or_named_as_a_flaw(details, count, flaw):
    usage = {"prompt_tokens": 5, "completion_tokens": 30, "completion_tokens_details": details}
    event = openai.parse_line(b"data: " + json.dumps({"choices": [], "usage": usage}).encode())
    assert event.reasoning_tokens == count and event.output_tokens == 30
    assert (event.flaw is None) if flaw is None else (flaw in event.flaw)


def _record(i: int, reasoning: int, answer_at: int | None, tokens: int = 40,
            told: int | None = None) -> RequestRecord:
    """A request sent at 0 that reasoned from 100 ms for `reasoning` chunks 10 ms apart, then
    answered at `answer_at` ms (None: never), done 50 ms later."""
    ms = 1_000_000
    record = RequestRecord(i, "p", 0.0, 0, first_chunk_ns=100 * ms, output_tokens=tokens,
                           output_tokens_source="usage", reasoning_tokens=told)
    if reasoning:
        record.first_reasoning_ns = 100 * ms
        record.last_reasoning_ns = (100 + 10 * (reasoning - 1)) * ms
        record.reasoning_chunks = reasoning
    record.first_answer_ns = None if answer_at is None or not reasoning else answer_at * ms
    end = (answer_at or (record.last_reasoning_ns or 0) // ms) + 50
    record.done_ns = end * ms
    record.output_chunks = reasoning + (6 if answer_at is not None else 0)
    return record


def test_the_row_times_the_first_answer_and_the_switch_and_counts_apart():
    records = [_record(0, 10, 300, told=20), _record(1, 5, 200, told=9),
               _record(2, 30, None, told=40)]  # cut while reasoning: no answer
    row = summarize_reasoning(records)
    assert (row["reasoning_requests"], row["reasoning_unanswered"]) == (3, 1)
    assert (row["reasoning_chunks"], row["answer_chunks"]) == (45, 12)
    assert (row["reasoning_tokens"], row["answer_tokens"]) == (69, 120 - 69)
    assert row["reasoning_tokens_source"] == "usage"
    assert row["ttfa_p50_ms"] == 250.0 and row["ttfa_mean_ms"] == 250.0  # the unanswered: left out
    assert row["ttfr_p50_ms"] == 100.0
    assert row["switch_p50_ms"] == (110 + 60) / 2  # 300 - 190 and 200 - 140
    assert set(row) <= set(BY_NAME)


def test_an_impossible_or_missing_count_is_no_count():
    for told in (0, None, 41):  # 0 for an answer that reasoned; none; over its output tokens
        row = summarize_reasoning([_record(0, 10, 300, told=told), _record(1, 4, 200, told=4)])
        assert row["reasoning_tokens"] is None and row["answer_tokens"] is None
        assert row["reasoning_tokens_source"] == "none" and row["reasoning_chunks"] == 14


def test_a_run_without_reasoning_has_no_reasoning_columns_and_ttfa_is_ttft_without_it():
    assert summarize_reasoning([_record(0, 0, 120)]) == {}
    plain = _record(1, 0, 90)
    plain.first_chunk_ns = 90_000_000
    row = summarize_reasoning([_record(0, 10, 300, told=10), plain])
    assert row["ttfa_p50_ms"] == (300 + 90) / 2


def test_an_answer_in_the_last_reasoning_chunk_is_not_counted_twice():
    record = _record(0, 3, None)
    record.first_answer_ns = record.last_reasoning_ns  # the switch chunk carried both
    record.output_chunks = 3 + 4
    row = summarize_reasoning([record])
    assert (row["reasoning_chunks"], row["answer_chunks"]) == (3, 5)
