"""A record's line in requests.jsonl (RequestRecord.to_json, loadtest/results/record.py) is the
same, byte for byte, as the line the rig wrote when to_json went through `dataclasses.asdict`:
for a sound 128-token answer, failed ones, open loop, a conversation's turns, engine flaws and
non-ASCII text, through RecordWriter and through a worker's message."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import pytest

from loadtest.results.files import RecordWriter, read_records
from loadtest.results.record import RequestRecord


def _asdict_line(record: RequestRecord) -> dict[str, Any]:
    """to_json as it was up to ff37e65 (a deep copy through asdict), the reference."""
    row = asdict(record)
    del row["output_ids"], row["output_text"], row["tool_calls"]
    if not record.engine_flaws:
        del row["engine_flaws"]
    row["ttft_ms"] = record.ttft_ms
    row["e2e_ms"] = record.e2e_ms
    if record.scheduled_ns is not None:
        row["ttft_sched_ms"], row["e2e_sched_ms"] = record.ttft_sched_ms, record.e2e_sched_ms
    else:
        del row["scheduled_ns"], row["cap_wait_ns"]
    if record.session_id is None:
        for name in ("session_id", "turn", "session_end", "turns_not_sent"):
            del row[name]
    if not record.reasoning_chunks and record.reasoning_tokens is None:
        for name in ("first_reasoning_ns", "last_reasoning_ns", "first_answer_ns",
                     "reasoning_chunks", "reasoning_tokens"):
            del row[name]
    if record.answer_check is None:
        del row["answer_check"]
    return row


def _answered(**changes: Any) -> RequestRecord:
    """A sound 128-token answer as the pacer's stream leaves it (127 gaps, usage counts)."""
    record = RequestRecord(17, "mixed-0042", 1_795_000_000.123456, 81_000_000_000, worker=1)
    record.first_chunk_ns = record.sent_ns + 50_213_407
    record.chunk_gaps_ns = [10_000_000 + (k * 7919) % 40_000 - 20_000 for k in range(127)]
    record.done_ns = record.first_chunk_ns + sum(record.chunk_gaps_ns) + 81_234
    record.output_chunks, record.output_tokens, record.prompt_tokens = 128, 128, 211
    record.output_tokens_source, record.finish_reason, record.http_status = "usage", "length", 200
    for name, value in changes.items():
        setattr(record, name, value)
    return record


def _failed() -> RequestRecord:
    record = RequestRecord(3, "p-é", 1_795_000_001.5, 5, http_status=500)
    return record.fail("http_status", "HTTP 500: « le modèle a échoué » — 模型失败 \U0001f525")


def _truncated_with_flaws() -> RequestRecord:
    record = _answered(chunk_gaps_ns=[9_000_000, 11_000_000], output_chunks=3, output_tokens=3,
                       output_tokens_source="chunks", finish_reason=None)
    record.engine_flaws += ["Content-Type 'text/plain', not text/event-stream", "a second [DONE]"]
    return record.fail("truncated", "stream ended before the engine finished it")


RECORDS = {
    "a sound 128-token answer": _answered,
    "no byte at all (None times, no gaps)": lambda: RequestRecord(0, "p", 0.0, 0).fail(
        "connect", "connection refused"),
    "failed, non-ASCII error text": _failed,
    "truncated, with engine flaws": _truncated_with_flaws,
    "open loop": lambda: _answered(scheduled_ns=80_999_000_000, cap_wait_ns=412_000),
    "open loop, no first chunk": lambda: RequestRecord(
        5, "p", 1.0, 100, scheduled_ns=90, cap_wait_ns=0).fail("timeout", "no byte in 600 s"),
    "a conversation's first turn": lambda: _answered(session_id=4, turn=1),
    "a conversation's last turn, outputs kept": lambda: _answered(
        session_id=4, turn=3, session_end="context_full", turns_not_sent=2, reconnects=1,
        rate_limited=2, rate_limited_wait_ns=1_500_000_000, output_ids=[1, 2, 3],
        output_text=["bonjour", " 世界", " 🔥"]),
    "a reasoning answer": lambda: _answered(
        first_reasoning_ns=81_050_213_407, last_reasoning_ns=81_900_000_000,
        first_answer_ns=81_910_000_000, reasoning_chunks=85, reasoning_tokens=85),
    "a checked tool call": lambda: _answered(
        answer_check="arguments_schema",
        tool_calls=[{"index": 0, "function": {"name": "f", "arguments": "{}"}}]),
}


@pytest.mark.parametrize("make", RECORDS.values(), ids=RECORDS.keys())
def test_the_line_is_byte_for_byte_the_asdict_line(make):
    record = make()
    new, old = record.to_json(), _asdict_line(make())
    assert list(new) == list(old)  # the same keys in the same order
    for options in ({"separators": (",", ":")}, {}, {"ensure_ascii": False}):
        assert json.dumps(new, **options) == json.dumps(old, **options)
    assert "output_ids" not in new and "output_text" not in new and "tool_calls" not in new


def test_the_written_file_is_the_asdict_file_and_reads_back(tmp_path):
    records = [make() for make in RECORDS.values()]
    writer = RecordWriter(tmp_path / "requests.jsonl", "run-1")
    for record in records:
        writer.write(record)
    writer.close()
    expected = "".join(json.dumps({"run_id": "run-1", **_asdict_line(record)},
                                  separators=(",", ":")) + "\n" for record in records)
    assert (tmp_path / "requests.jsonl").read_bytes() == expected.encode("utf-8")
    back = read_records(tmp_path / "requests.jsonl")
    assert [r.to_json() for r in back] == [r.to_json() for r in records]


def test_the_row_holds_the_records_own_lists_and_keys_added_to_it_stay_out_of_the_record():
    """The row holds the record's own lists (no copy): complete() serializes it, or a worker
    queues it for its next message, after the stream that filled them has ended. A caller
    that adds keys to the row (the worker's output_ids) leaves the record as it was."""
    record = _answered(output_ids=[7], output_text=["x"])
    row = record.to_json()
    assert row["chunk_gaps_ns"] is record.chunk_gaps_ns
    row["output_ids"], row["output_text"] = record.output_ids, record.output_text
    row["ttft_ms"] = 0.0
    assert record.to_json()["ttft_ms"] == pytest.approx(50.213407)
    assert "output_ids" not in record.to_json()
