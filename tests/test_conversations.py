"""Conversations on the wire (loadtest/client/conversation.py): each turn carries the engine's
own earlier answers, sessions end complete, context_full or failed with the rest recorded as
not sent, the dispatcher hands out sessions, and the run's per-turn columns."""

from __future__ import annotations

import csv
import json
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import gevent
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.client.arrivals import send_offsets_ns
from loadtest.client.conversation import Conversation, Sessions, TurnOptions, run_session
from loadtest.client.dispatch import Dispatcher
from loadtest.results.record import SESSION_ENDS, RequestRecord
from loadtest.results.summary import summarize
from loadtest.workload.spec import SessionSpec, TurnSpec, WorkloadError
from rig_helpers import run_locust


def _session(session_id: int = 0, turns: int = 3, *, think_s: float = 0.0, max_tokens: int = 8,
             system: str = "", prompt_tokens: int | None = None) -> SessionSpec:
    return SessionSpec(session_id, f"c{session_id}", tuple(
        TurnSpec(f"question {t} of {session_id}", max_tokens, think_s if t else 0.0, prompt_tokens)
        for t in range(turns)), system)


def _answer(spec, text: str = "", prompt_tokens: int = 20, output_tokens: int = 8,
            status: int | None = 200, error: str = "") -> RequestRecord:
    """The record transport.send would return for `spec`: sent, streamed `text`, or failed."""
    record = RequestRecord(spec.request_id, spec.prompt_id, 0.0, 1_000, first_chunk_ns=2_000,
                           done_ns=3_000, prompt_tokens=prompt_tokens,
                           output_tokens=output_tokens, http_status=status)
    record.output_text = [text[: len(text) // 2], text[len(text) // 2:]]  # as streamed, in pieces
    if status and status >= 400:
        record.first_chunk_ns = record.output_tokens = record.output_text = None
        record.fail("http_status", f"HTTP {status}: {error}")
    return record


def _messages(spec) -> list[dict[str, str]]:
    return json.loads(spec.body)["messages"]


def test_each_turn_carries_the_engines_actual_answers():
    conversation = Conversation(_session(turns=3, system="be brief"), 10, TurnOptions("m"))
    first = conversation.next_request()
    assert _messages(first) == [{"role": "system", "content": "be brief"},
                                {"role": "user", "content": "question 0 of 0"}]
    conversation.answered(_answer(first, "the first answer"))
    second = conversation.next_request()
    assert _messages(second)[1:] == [
        {"role": "user", "content": "question 0 of 0"},
        {"role": "assistant", "content": "the first answer"},
        {"role": "user", "content": "question 1 of 0"}]
    conversation.answered(_answer(second, "and a second"))
    third = conversation.next_request()
    assert [m["content"] for m in _messages(third)][4:] == ["and a second", "question 2 of 0"]
    body = json.loads(third.body)
    assert body["stream"] and body["max_tokens"] == 8 and body["model"] == "m"
    assert (first.request_id, second.request_id, third.request_id) == (10, 11, 12)
    assert third.prompt_id == "c0:3" and third.path == "/v1/chat/completions"


def test_a_session_whose_turns_are_all_served_ends_complete():
    conversation = Conversation(_session(turns=2), 0, TurnOptions("m"))
    records = []
    while (spec := conversation.next_request()) is not None:
        records.append(_answer(spec, "ok"))
        conversation.answered(records[-1])
    assert [(r.session_id, r.turn, r.session_end, r.turns_not_sent) for r in records] == [
        (0, 1, None, 0), (0, 2, "complete", 0)]
    assert records[0].output_text is None  # carried in the messages, not kept on the record


def test_the_next_turn_that_would_not_fit_the_context_is_not_sent():
    """Estimated from the engine's own counts: 3,950 prompt + 100 answer + the next message
    (10 tokens, counted by the source) + the template margin + 64 output > 4,096."""
    session = _session(turns=4, max_tokens=64, prompt_tokens=10)
    conversation = Conversation(session, 0, TurnOptions("m", max_model_len=4096))
    first = _answer(conversation.next_request(), "x", prompt_tokens=3_950, output_tokens=100)
    conversation.answered(first)
    assert conversation.next_request() is None
    assert (first.session_end, first.turns_not_sent, conversation.end) == ("context_full", 3,
                                                                            "context_full")
    assert first.ok and not first.context_refused  # the last served turn, not a refusal


def test_a_turn_that_fits_is_sent():
    conversation = Conversation(_session(turns=2, max_tokens=64, prompt_tokens=10), 0,
                                TurnOptions("m", max_model_len=4096))
    conversation.answered(_answer(conversation.next_request(), "x", prompt_tokens=3_000,
                                  output_tokens=100))
    assert conversation.next_request() is not None


@pytest.mark.parametrize("error", [
    "This model's maximum context length is 4096 tokens. However, you requested 4200 tokens",
    "the request exceeds the available context size, try increasing it",
    "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096"])
def test_an_engine_refusing_the_length_ends_the_session_context_full(error: str):
    conversation = Conversation(_session(turns=3), 0, TurnOptions("m"))
    conversation.answered(_answer(conversation.next_request(), "fine"))
    refused = _answer(conversation.next_request(), status=400, error=error)
    conversation.answered(refused)
    assert conversation.next_request() is None
    assert (refused.session_end, refused.turns_not_sent, refused.turn) == ("context_full", 1, 2)
    assert refused.context_refused
    row = summarize([_answer(SimpleNamespace(request_id=0, prompt_id="p"), "a"), refused])
    assert (row["completed"], row["failed"], row["errors"]) == (1, 0, "")  # not a failed run


def test_a_failed_turn_ends_its_session_with_the_rest_not_sent():
    conversation = Conversation(_session(turns=4), 0, TurnOptions("m"))
    failed = _answer(conversation.next_request(), status=500, error="engine fell over")
    conversation.answered(failed)
    assert conversation.next_request() is None
    assert (failed.session_end, failed.turns_not_sent, failed.context_refused) == ("failed", 3,
                                                                                   False)
    assert summarize([failed])["failed"] == 1
    other = _answer(Conversation(_session(turns=2), 0, TurnOptions("m")).next_request(),
                    status=400, error="unknown field 'foo'")
    conversation = Conversation(_session(turns=2), 0, TurnOptions("m"))
    conversation.next_request()
    conversation.answered(other)
    assert other.session_end == "failed"  # a 400 that names no context is a failure


def test_run_session_thinks_between_turns_and_marks_the_last_record():
    sleeps, accounted = [], []
    conversation = Conversation(_session(turns=3, think_s=0.25), 0, TurnOptions("m"))
    run_session(conversation, _answer, lambda record, last: accounted.append((record.turn, last)),
                open_loop=False, sleep=sleeps.append)
    assert sleeps == [0.25, 0.25]  # before turns 2 and 3, none before the first
    assert accounted == [(1, False), (2, False), (3, True)]


def test_in_open_loop_a_later_turn_is_due_when_its_think_time_ends():
    records = []
    conversation = Conversation(_session(turns=2), 0, TurnOptions("m"))
    run_session(conversation, _answer, lambda record, last: records.append(record),
                open_loop=True, sleep=lambda s: None)
    assert records[0].scheduled_ns is None  # the dispatcher stamps the session's own time
    assert records[1].scheduled_ns is not None


def test_sessions_number_turns_from_fixed_first_ids():
    sessions = Sessions([_session(0, 2), _session(1, 3), _session(2, 1)], TurnOptions("m"), "chat")
    assert len(sessions) == 3 and sessions.turns == 6
    assert [sessions[i].next_request().request_id for i in range(3)] == [0, 2, 5]
    assert sessions[1] is not sessions[1]  # each take is a fresh conversation


@pytest.mark.parametrize("sessions, api, message", [
    ([_session(0)], "completions", "pass --api chat"),
    ([_session(0, turns=0)], "chat", "has no turns"),
    ([_session(1)], "chat", "numbers its sessions 0, 1, 2"),
])
def test_a_workload_of_sessions_that_cannot_be_sent_is_refused(sessions, api, message):
    with pytest.raises(WorkloadError, match=message):
        Sessions(sessions, TurnOptions("m"), api)


_OUTCOMES = st.sampled_from(["ok", "ok", "ok", "failed", "refused", "full"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_OUTCOMES, min_size=1, max_size=6), min_size=1, max_size=8))
def test_every_turn_is_sent_once_or_counted_not_sent(plans: list[list[str]]):
    """Whatever each turn's outcome: request ids are unique and fixed, every session ends once,
    with a reason, on its last record, and its turns are either sent or counted not sent."""
    sessions = Sessions([_session(i, len(plan), max_tokens=8, prompt_tokens=4)
                         for i, plan in enumerate(plans)],
                        TurnOptions("m", max_model_len=1_000), "chat")
    records: list[RequestRecord] = []
    for index, plan in enumerate(plans):
        conversation = sessions[index]
        while (spec := conversation.next_request()) is not None:
            outcome = plan[conversation.sent]
            record = {"ok": lambda: _answer(spec, "a"),
                      "failed": lambda: _answer(spec, status=500, error="boom"),
                      "refused": lambda: _answer(spec, status=400, error="context length"),
                      "full": lambda: _answer(spec, "a", prompt_tokens=990)}[outcome]()
            conversation.answered(record)
            records.append(record)
    ids = [r.request_id for r in records]
    assert len(set(ids)) == len(ids) and set(ids) <= set(range(sessions.turns))
    for index, plan in enumerate(plans):
        mine = [r for r in records if r.session_id == index]
        ends = [r for r in mine if r.session_end is not None]
        assert len(ends) == 1 and ends[0] is mine[-1] and ends[0].session_end in SESSION_ENDS
        assert len(mine) + ends[0].turns_not_sent == len(plan)
        assert [r.turn for r in mine] == list(range(1, len(mine) + 1))
    row = summarize(records)
    assert row["sessions"] == len(plans)
    assert sum(row[f"sessions_{end}"] for end in SESSION_ENDS) == len(plans)
    assert row["turns_sent"] + row["turns_not_sent"] == sessions.turns
    assert row["completed"] + row["failed"] + row["context_refused"] == len(records)


def test_the_run_summary_splits_first_and_later_turns():
    def turn(session: int, number: int, ttft_ms: float, prompt: int, end: str | None = None):
        record = RequestRecord(number, "p", 0.0, 0, first_chunk_ns=int(ttft_ms * 1e6),
                               done_ns=int(ttft_ms * 1e6) + 1, prompt_tokens=prompt,
                               output_tokens=4, session_id=session, turn=number, session_end=end)
        return record

    records = [turn(0, 1, 100, 30), turn(0, 2, 20, 80, "complete"),
               turn(1, 1, 120, 30), turn(1, 2, 30, 90), turn(1, 3, 40, 140, "complete")]
    row = summarize(records)
    assert (row["sessions"], row["sessions_complete"], row["turns_sent"]) == (2, 2, 5)
    assert row["ttft_turn1_p50_ms"] == pytest.approx(110)
    assert row["ttft_later_p50_ms"] == pytest.approx(30)
    assert row["prompt_tokens_later_mean"] == pytest.approx(310 / 3)
    assert "sessions" not in summarize([RequestRecord(0, "p", 0.0, 0, done_ns=1)])
    line = records[1].to_json()
    assert (line["session_id"], line["turn"], line["session_end"]) == (0, 2, "complete")
    assert RequestRecord.from_json(line).session_end == "complete"
    assert "session_id" not in RequestRecord(0, "p", 0.0, 0).to_json()  # single requests as before


def test_the_dispatcher_hands_out_sessions_and_ends_with_the_last_turn():
    finished = []
    runner = SimpleNamespace(user_count=1, quit=lambda: None)
    sessions = Sessions([_session(0, 2), _session(1, 1)], TurnOptions("m"), "chat")
    workload = SimpleNamespace(specs=[], sha256="x", sessions=sessions.sessions)
    dispatcher = Dispatcher(SimpleNamespace(runner=runner), workload, lambda r: None,
                            lambda: finished.append(True), units=sessions)
    dispatcher.user_ready()
    dispatcher.spawning_complete()
    taken = []
    while (conversation := dispatcher.take()) is not None:
        taken.append(conversation.spec.session_id)
        run_session(conversation, _answer, dispatcher.complete, open_loop=False)
        if not finished:
            assert taken == [0]
    assert taken == [0, 1] and finished == [True]
    gevent.sleep(0)  # the runner's quit, spawned at the end


# --- on the real embedded engine (vLLM on CPU, the tiny model) -----------------------------------

def _run_records(out: Path) -> tuple[dict[str, str], list[dict]]:
    with (out / "runs.csv").open(newline="") as file:
        [row] = list(csv.DictReader(file))
    [path] = (out / "runs").glob("*/requests.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return row, sorted(records, key=lambda r: r["request_id"])


def _context_len(url: str) -> int:
    with urllib.request.urlopen(url + "/v1/models", timeout=10) as answer:
        return json.load(answer)["data"][0]["max_model_len"]


@pytest.mark.engine
def test_each_turn_carries_the_answers_before_it(engine_url: str, tmp_path: Path):
    """4-turn synthetic sessions at 3 users: each later turn's prompt, as the engine counted it,
    grew by at least the answer before it and the new user message (40 tokens), so the answers
    really were sent back; TTFT of first and later turns is in the row."""
    result = run_locust("--host", engine_url, "--users", "3", "--requests", "6", "--api", "chat",
                        "--workload", "conversation", "--turns", "4", "--input-len", "40",
                        "--max-tokens", "16", "--ignore-eos", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    row, records = _run_records(tmp_path)
    assert [r["request_id"] for r in records] == list(range(24))  # every turn sent once
    for session in range(6):
        turns = [r for r in records if r["session_id"] == session]
        assert [r["turn"] for r in turns] == [1, 2, 3, 4]
        assert [r.get("session_end") for r in turns] == [None, None, None, "complete"]
        for before, after in zip(turns, turns[1:]):
            grown = after["prompt_tokens"] - before["prompt_tokens"]
            assert grown >= before["output_tokens"] + 40, (session, before, after)
    assert (row["sessions"], row["sessions_complete"], row["turns_sent"]) == ("6", "6", "24")
    assert (row["failed"], row["turns_not_sent"], row["workload_source"]) == ("0", "0", "conversation")
    assert float(row["ttft_turn1_p50_ms"]) > 0 and float(row["ttft_later_p50_ms"]) > 0
    assert float(row["prompt_tokens_later_mean"]) > float(row["prompt_tokens_turn1_mean"]) + 56
    assert "sessions 6/6: 6 complete" in result.stderr and "turn 1 p50" in result.stderr


@pytest.mark.engine
def test_sessions_that_outgrow_the_context_end_context_full(engine_url: str, tmp_path: Path):
    """Two long conversations from a ShareGPT file, sized to the engine's context M. One of
    whole words (" information": one token, 12 bytes, so the byte estimate counts high) ends
    when its next turn is estimated past M; one of CJK text (3 tokens a character, 3 bytes,
    so the estimate counts low) is sent and refused by the engine with a 400. Both end
    context_full with the rest not sent, and the run neither fails nor crashes."""
    context = _context_len(engine_url)
    words = " information" * (context // 6)
    cjk = "你好世界" * round(0.21 * context / 4)
    dataset = tmp_path / "long.json"
    dataset.write_text(json.dumps([
        {"id": "words", "conversations": [m for _ in range(6) for m in (
            {"from": "human", "value": words}, {"from": "gpt", "value": "ok"})]},
        {"id": "cjk", "conversations": [m for _ in range(3) for m in (
            {"from": "human", "value": cjk}, {"from": "gpt", "value": "ok"})]}]))
    out = tmp_path / "out"
    result = run_locust("--host", engine_url, "--users", "2", "--requests", "2", "--api", "chat",
                        "--workload", "dataset", "--dataset", str(dataset), "--dataset-mode",
                        "conversation", "--max-tokens", "32", "--ignore-eos", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    row, records = _run_records(out)
    by_session = {}
    for record in records:
        by_session.setdefault(record["prompt_id"].split(":")[0], []).append(record)
    estimated, refused = by_session["words"][-1], by_session["cjk"][-1]
    assert estimated["session_end"] == "context_full" and estimated["error_kind"] is None
    assert estimated["turn"] + estimated["turns_not_sent"] == 6 and estimated["turns_not_sent"] >= 1
    assert estimated["prompt_tokens"] < context  # ended before the engine had to refuse
    assert (refused["session_end"], refused["http_status"], refused["turn"]) == ("context_full", 400, 2)
    assert refused["turns_not_sent"] == 1 and "context" in refused["error"]
    assert all(r["error_kind"] is None for r in records if r is not refused)
    assert (row["sessions_context_full"], row["context_refused"], row["failed"]) == ("2", "1", "0")
    assert row["errors"] == "" and "failed_requests" not in row["verdict_reasons"]
    assert "2 context_full" in result.stderr


@pytest.mark.engine
def test_open_loop_sessions_across_processes_start_on_schedule(engine_url: str, tmp_path: Path):
    """--rate starts sessions on a gamma schedule: each first turn at its scheduled time (one
    origin for both processes), each later turn due when its think time ended after the
    answer before it; every turn of every session sent once."""
    result = run_locust("--host", engine_url, "--users", "4", "--processes", "2", "--api", "chat",
                        "--requests", "6", "--workload", "conversation", "--turns", "3",
                        "--input-len", "30", "--max-tokens", "8", "--ignore-eos", "--rate", "3",
                        "--arrival", "gamma", "--burstiness", "0.5", "--arrival-seed", "2",
                        "--think-time", "0.2", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    row, records = _run_records(tmp_path)
    assert [r["request_id"] for r in records] == list(range(18))
    assert len({r["worker"] for r in records}) == 2
    firsts = [r for r in records if r["turn"] == 1]
    origin = firsts[0]["scheduled_ns"]
    offsets = np.array([r["scheduled_ns"] - origin for r in firsts])
    assert np.abs(offsets - send_offsets_ns(6, 3.0, "gamma", 2, 0.5)).max() < 1_000_000
    for before, after in zip(records, records[1:]):
        if after["turn"] > 1:  # due 0.2 s after the answer before it (gevent's timer may
            # wake a millisecond early: its loop's clock is cached), and sent then
            assert after["scheduled_ns"] - before["done_ns"] >= 195_000_000
            assert after["sent_ns"] - after["scheduled_ns"] < 50_000_000
    assert (row["arrival"], row["burstiness"], row["sessions_complete"]) == ("gamma", "0.5", "6")


@pytest.mark.parametrize("args, api", [
    (["--workload", "conversation"], "chat"),
    (["--workload", "dataset", "--dataset-mode", "conversation"], "chat"),
    (["--workload", "conversation", "--api", "completions"], "completions"),  # refused later
    (["--workload", "synthetic"], "completions"),
])
def test_a_conversation_goes_over_chat_unless_told_otherwise(args: list[str], api: str):
    from loadtest.cli.run import parser
    from loadtest.client.options import config_from_options

    options = parser().parse_args(["--engine", "vllm-cpu", *args])
    assert config_from_options(options, "http://127.0.0.1:1").api == api
