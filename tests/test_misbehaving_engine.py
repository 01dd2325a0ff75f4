"""The engine as bad input: a run against an engine that answers wrongly ends on its own, says
what the engine did wrong, and keeps every request it measured (issue 27).

tests/fuzz_engine.py answers each request in the wrong way its prompt names; the cases are
generated: every field the dialects read, given a value of each wrong JSON type, sign and size,
plus the wrong streams (split at every byte, overlong lines, streams that never end, answers
that are not streams, wrong content types, invalid UTF-8, missing or extra [DONE]). The real
locustfile runs them: no traceback, every request recorded with the error_kind that names what
was wrong (or ok and flagged, where the request was usable), the row written, exit 1.
No real engine runs here (fast tier).
"""

from __future__ import annotations

import csv
import http.server
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz_engine import KINDS, OPENAI_ONLY
from loadtest.client.bounds import OUTPUT_MARGIN, OUTPUT_SLACK, Bounds, parse_request_deadline
from loadtest.client.options import ConfigError
from loadtest.client.probe import ProbeError, probe_engine
from loadtest.client.protocols import MAX_COUNT, openai, tgi
from loadtest.client.transport import new_client, send
from loadtest.client.workload import RequestSpec
from loadtest.results.checks import ERROR_REMEDIES
from loadtest.results.record import ERROR_KINDS
from rig_helpers import run_locust, running_fuzz_engine

# Hypothesis's per-example time limit fails examples on a shared, loaded machine: none here.
_untimed = settings(deadline=None)
MAX_TOKENS = 4
READ_TIMEOUT_S = 1.0
DEADLINE_S = 2.0

# The wrong values of a field, by what it holds: every JSON type it may not hold, and for counts
# the wrong sign and sizes too (past MAX_COUNT, or past the output bound of MAX_TOKENS).
_OTHER_TYPES = {"string": "many", "integer": 7, "number": 5.5, "boolean": True, "list": [1],
                "object": {"a": 1}}
_WRONG_COUNTS = [-1, 5.0, "5", MAX_COUNT + 1, 10**30]
PAST_OUTPUT_BOUND = OUTPUT_MARGIN * MAX_TOKENS + OUTPUT_SLACK + 1


def _wrong_values(holds: str) -> list[Any]:
    """`holds`: a JSON type, "count", or "output count" (a count bounded by max_tokens too)."""
    if holds.endswith("count"):
        wrong = [v for t, v in _OTHER_TYPES.items() if t != "integer"] + _WRONG_COUNTS
        return wrong + ([PAST_OUTPUT_BOUND] if holds == "output count" else [])
    return [v for t, v in _OTHER_TYPES.items() if t != holds]


# (event, path, what it holds, outcome, a word the error or flaw names): "flaw" fields are
# reports the rig ignores on a usable request; the rest make the stream unreadable.
FIELDS = {
    "completions": [
        ("token", "", "object", "stream_protocol", "not an object"),
        ("token", "choices", "list", "stream_protocol", "choices"),
        ("token", "choices.0", "object", "stream_protocol", "choice"),
        ("token", "choices.0.text", "string", "stream_protocol", "text"),
        ("final", "choices.0.finish_reason", "string", "stream_protocol", "finish_reason"),
        ("usage", "usage", "object", "flaw", "usage"),
        ("usage", "usage.completion_tokens", "output count", "flaw", "completion_tokens"),
        ("usage", "usage.prompt_tokens", "count", "flaw", "prompt_tokens"),
    ],
    "chat": [
        ("token", "", "object", "stream_protocol", "not an object"),
        ("token", "choices", "list", "stream_protocol", "choices"),
        ("token", "choices.0", "object", "stream_protocol", "choice"),
        ("token", "choices.0.delta", "object", "stream_protocol", "delta"),
        ("token", "choices.0.delta.content", "string", "stream_protocol", "content"),
        ("final", "choices.0.finish_reason", "string", "stream_protocol", "finish_reason"),
        ("usage", "usage", "object", "flaw", "usage"),
        ("usage", "usage.completion_tokens", "output count", "flaw", "completion_tokens"),
        ("usage", "usage.prompt_tokens", "count", "flaw", "prompt_tokens"),
    ],
    "generate": [
        ("token", "", "object", "stream_protocol", "not an object"),
        ("token", "token", "object", "stream_protocol", "token"),
        ("token", "token.text", "string", "stream_protocol", "text"),
        ("last", "details", "object", "stream_protocol", "details"),
        ("last", "details.finish_reason", "string", "stream_protocol", "finish_reason"),
        ("last", "details.generated_tokens", "output count", "flaw", "tokens"),
        ("last", "details.input_length", "count", "flaw", "input_length"),
    ],
}
# each wrong stream's outcome: an error_kind, "flaw" (usable, flagged), or None (sound)
STREAMS = {"ok": None, "split": None, "overlong": "stream_protocol", "endless": "over_max_tokens",
           "pings": "deadline", "trickle": "deadline", "silent": "timeout", "empty": "truncated",
           "not_stream": "stream_protocol", "html": "stream_protocol",
           "not_http": "stream_protocol", "bad_chunking": "stream_protocol", "content_type": "flaw",
           "bad_utf8": "stream_protocol", "deep_json": "stream_protocol", "no_done": "truncated",
           "double_done": "flaw", "after_done": "stream_protocol"}
STREAM_WORDS = {"overlong": "over 1048576 bytes", "endless": "past", "pings": "deadline",
                "trickle": "deadline", "not_stream": "application/json", "html": "SSE",
                "not_http": "not valid HTTP", "bad_chunking": "not valid HTTP",
                "content_type": "Content-Type", "bad_utf8": "UTF-8", "deep_json": "JSON",
                "double_done": "second [DONE]", "after_done": "after [DONE]"}


def _cases(api: str) -> list[tuple[dict[str, Any], str | None, str]]:
    """(case, outcome, word) for every generated case of one API."""
    cases = []
    for kind in KINDS:
        if kind == "field" or (api == "generate" and kind in OPENAI_ONLY):
            continue
        cases.append(({"kind": kind}, STREAMS[kind], STREAM_WORDS.get(kind, "")))
    for event, path, holds, outcome, word in FIELDS[api]:
        for value in _wrong_values(holds):
            case = {"kind": "field", "event": event, "path": path, "value": value}
            # a count past the output bound is flagged in the bound's words
            cases.append((case, outcome, "past" if value == PAST_OUTPUT_BOUND else word))
    return cases


def _run(api: str, tmp_path: Path) -> tuple[Any, list[dict[str, Any]], dict[str, str],
                                            dict[str, tuple[str | None, str]]]:
    """The real locustfile against the fuzz engine, one request per case."""
    cases = _cases(api)
    prompts = tmp_path / "cases.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"case{i}", "prompt": json.dumps(case)}) + "\n"
                               for i, (case, _, _) in enumerate(cases)))
    expected = {f"case{i}": (outcome, word) for i, (_, outcome, word) in enumerate(cases)}
    engine = "tgi" if api == "generate" else "vllm-cpu"
    with running_fuzz_engine() as url:
        started = time.monotonic()
        result = run_locust("--host", url, "--engine", engine, "--api", api, "--out",
                            str(tmp_path), "--prompts", str(prompts), "--users", "8",
                            "--requests", str(len(cases)), "--max-tokens", str(MAX_TOKENS),
                            "--read-timeout", str(READ_TIMEOUT_S), "--request-deadline",
                            str(DEADLINE_S), "--telemetry-interval", "0", timeout_s=120)
        took_s = time.monotonic() - started
    assert took_s < 60, f"the run took {took_s:.0f} s"
    with open(tmp_path / "runs.csv", newline="") as file:
        [row] = list(csv.DictReader(file))
    records = [json.loads(line) for line in
               (tmp_path / "runs" / row["run_id"] / "requests.jsonl").read_text().splitlines()]
    return result, records, row, expected


@pytest.mark.parametrize("api", ["completions", "chat", "generate"])
def test_every_wrong_answer_ends_recorded_with_what_was_wrong(api: str, tmp_path: Path):
    result, records, row, expected = _run(api, tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert sorted(r["prompt_id"] for r in records) == sorted(expected)  # each request once
    wrong = []
    for record in records:
        outcome, word = expected[record["prompt_id"]]
        flaws = record.get("engine_flaws", [])
        got = record["error_kind"] or ("flaw" if flaws else None)
        said = record["error"] or "; ".join(flaws)
        if got != outcome or word not in said:
            wrong.append((record["prompt_id"], outcome, word, got, said))
    assert not wrong, wrong
    ok = [r for r in records if r["error_kind"] is None]
    assert all(r["output_tokens"] == MAX_TOKENS for r in ok)  # a bad count never counted
    assert all(r["prompt_tokens"] in (None, 3) for r in records)
    flawed = [r for r in ok if r.get("engine_flaws")]
    assert int(row["failed"]) == len(records) - len(ok)
    assert int(row["flawed_requests"]) == len(flawed) > 0
    assert int(row["output_tokens"]) == MAX_TOKENS * len(ok)
    assert row["verdict"] == "invalid"
    assert {"failed_requests", "engine_flaws"} <= set(row["verdict_reasons"].split(";"))
    assert "engine_flaws" in row["warnings"]
    assert float(row["request_deadline_s"]) == DEADLINE_S
    cut = [r for r in records if r["error_kind"] == "deadline"]
    # cut at the deadline (a loaded, shared machine may wake the timer a little late)
    assert all(DEADLINE_S <= (r["done_ns"] - r["sent_ns"]) / 1e9 < DEADLINE_S + 2 for r in cut)
    assert "deadline: " in result.stderr  # the summary says what to do about each kind


@pytest.mark.parametrize("processes", [[], ["--processes", "2"]], ids=["one process", "two"])
def test_a_run_whose_only_fault_is_a_flawed_count_exits_1_with_every_request_ok(
        processes: list[str], tmp_path: Path):
    """The issue's first report: usage.completion_tokens "many" crashed Locust's statistics.
    With workers, each request's flaws travel to the master with its record."""
    case = {"kind": "field", "event": "usage", "path": "usage.completion_tokens", "value": "many"}
    prompts = tmp_path / "many.jsonl"
    prompts.write_text(json.dumps({"id": "many", "prompt": json.dumps(case)}) + "\n")
    with running_fuzz_engine() as url:
        result = run_locust("--host", url, "--engine", "vllm-cpu", "--out", str(tmp_path),
                            "--prompts", str(prompts), "--users", "2", "--requests", "4",
                            "--max-tokens", str(MAX_TOKENS), "--telemetry-interval", "0",
                            *processes, timeout_s=60)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "TypeError" not in result.stderr
    with open(tmp_path / "runs.csv", newline="") as file:
        [row] = list(csv.DictReader(file))
    assert (row["completed"], row["failed"], row["flawed_requests"]) == ("4", "0", "4")
    assert row["output_tokens_source"] == "chunks" and row["output_tokens"] == str(4 * MAX_TOKENS)
    assert "usage.completion_tokens is a string 'many'" in row["engine_flaws"]


def _spec(case: dict[str, Any], max_tokens: int = MAX_TOKENS) -> RequestSpec:
    body = openai.build_body("completions", "fuzz-model", json.dumps(case), max_tokens,
                             ignore_eos=False, temperature=0.0)
    return RequestSpec(0, "case", "/v1/completions", body)


def test_an_overlong_line_fails_at_the_bound_without_reading_the_rest():
    with running_fuzz_engine() as url:
        client = new_client(url, read_timeout_s=5)
        started = time.perf_counter()
        record = send(client, _spec({"kind": "overlong"}), openai.parse_line, "usage", {},
                      bounds=Bounds(deadline_s=30, max_line_bytes=64 * 1024))
        client.close()
    assert record.error_kind == "stream_protocol" and "over 65536 bytes" in record.error
    assert time.perf_counter() - started < 2


def test_a_trickling_server_is_cut_at_the_deadline_though_the_read_timeout_never_fires():
    with running_fuzz_engine() as url:
        client = new_client(url, read_timeout_s=1)
        record = send(client, _spec({"kind": "trickle"}), openai.parse_line, "usage", {},
                      bounds=Bounds(deadline_s=1.5))
        client.close()
    assert record.error_kind == "deadline"
    assert 1.5 <= (record.done_ns - record.sent_ns) / 1e9 < 3.5


def test_a_stream_split_at_every_byte_reads_as_the_whole():
    with running_fuzz_engine() as url:
        client = new_client(url, read_timeout_s=5)
        record = send(client, _spec({"kind": "split"}, max_tokens=16), openai.parse_line,
                      "usage", {})
        client.close()
    assert record.ok and record.engine_flaws == []
    assert (record.output_chunks, record.output_tokens, record.prompt_tokens) == (16, 16, 3)


@_untimed
@given(st.text(min_size=1, max_size=12))
def test_a_bad_request_deadline_is_one_config_error(value: str):
    try:
        deadline = parse_request_deadline(type("Options", (), {"request_deadline": value})())
    except ConfigError as exc:
        assert "\n" not in str(exc) and "--request-deadline" in str(exc)
    else:
        assert deadline is None or 0.001 <= deadline <= 1e9


def test_a_bad_request_deadline_is_refused_in_one_line_before_anything_is_sent(tmp_path: Path):
    out = tmp_path / "out"
    result = run_locust("--host", "http://127.0.0.1:9", "--request-deadline", "soon",
                        "--out", str(out), timeout_s=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors == ["error: --request-deadline must be a number of seconds, got 'soon'"]
    assert not out.exists()


# Any JSON value in any field the dialects read: a StreamEvent with sound counts, or a
# ProtocolError, never another exception.
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)
_OPENAI_PATHS = [p for _, p, *_ in FIELDS["completions"]] + ["choices.0.delta",
                                                             "choices.0.delta.content",
                                                             "choices.0.token_ids", "error"]
_TGI_PATHS = [p for _, p, *_ in FIELDS["generate"]] + ["error"]


def _event_with(template: dict[str, Any], path: str, value: Any) -> bytes:
    from fuzz_engine import _replaced
    return b"data: " + json.dumps(_replaced(json.loads(json.dumps(template)), path, value)
                                  ).encode() + b"\n"


def _sound_counts(event: Any) -> bool:
    return event is None or all(c is None or (type(c) is int and 0 <= c <= MAX_COUNT)
                                for c in (event.prompt_tokens, event.output_tokens))


@_untimed
@given(st.sampled_from(_OPENAI_PATHS), _json)
def test_openai_any_value_in_any_field_is_read_or_refused(path: str, value: Any):
    template = {"choices": [{"index": 0, "text": "x", "finish_reason": "length"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4}}
    try:
        event = openai.parse_line(_event_with(template, path, value))
    except openai.ProtocolError:
        return
    assert _sound_counts(event)


@_untimed
@given(st.sampled_from(_TGI_PATHS), _json)
def test_tgi_any_value_in_any_field_is_read_or_refused(path: str, value: Any):
    template = {"token": {"id": 1, "text": "x", "special": False},
                "details": {"finish_reason": "length", "generated_tokens": 4, "input_length": 3}}
    try:
        event = tgi.parse_line(_event_with(template, path, value))
    except tgi.ProtocolError:
        return
    assert _sound_counts(event)


@_untimed
@given(st.binary(max_size=200))
def test_any_bytes_are_read_or_refused(line: bytes):
    for parse_line in (openai.parse_line, tgi.parse_line):
        try:
            event = parse_line(line)
        except openai.ProtocolError:
            continue
        assert _sound_counts(event)


@_untimed
@given(st.text(), st.integers(min_value=1, max_value=10**6),
       st.sampled_from(["completions", "chat", "generate"]))
def test_the_bounds_read_each_request_body_s_own_length(prompt: str, max_tokens: int, api: str):
    """The output bound and default deadline come from the body the dialect built, whatever
    its prompt says (a prompt that spells out "max_tokens": 9 included)."""
    dialect = tgi if api == "generate" else openai
    for text in (prompt, f'"max_tokens": 9 {prompt}', '{"max_new_tokens": 9}'):
        body = dialect.build_body(api, "m", text, max_tokens, ignore_eos=False, temperature=0.0)
        deadline_s, limit = Bounds(read_timeout_s=10).for_request(body)
        assert (deadline_s, limit) == (10 + max_tokens, OUTPUT_MARGIN * max_tokens + OUTPUT_SLACK)


def test_every_error_kind_has_its_remedy():
    assert list(ERROR_REMEDIES) == list(ERROR_KINDS)


class _ModelsAnswer(http.server.BaseHTTPRequestHandler):
    """/v1/models (and /version) answering whatever JSON the test sets."""
    body = b"{}"

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *_: Any) -> None:
        pass


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)


@settings(max_examples=25, deadline=None)
@given(data=_JSON, entry=st.dictionaries(st.sampled_from(["id", "root", "max_model_len"]), _JSON))
def test_the_engines_model_list_is_read_or_refused_whatever_it_holds(data: Any, entry: Any):
    """The check before a run asks the engine's /v1/models: any JSON there is read (a name
    found or not) or a ProbeError, never a crash."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ModelsAnswer)
    # serve_forever's default poll (0.5 s) would make each example's shutdown() wait that long
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        for answer in ({"data": data}, {"data": [entry]}, data):
            _ModelsAnswer.body = json.dumps(answer).encode()
            try:
                info = probe_engine(f"http://127.0.0.1:{server.server_address[1]}", "completions",
                                    {}, timeout_s=5)
            except ProbeError:
                continue
            assert isinstance(info.model, str)
            assert info.max_model_len is None or info.max_model_len > 0
    finally:
        server.shutdown()
        server.server_close()
