"""The structured workload (loadtest/workload/structured.py) and its answers' checks (answers.py):
the shipped tasks' bodies, the unconstrained baseline, each reason an answer fails, and bad task
files refused in one line before anything is sent. Fast: no engine."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadtest.results.equivalence import write_outputs
from loadtest.results.record import RequestRecord
from loadtest.workload import WorkloadError, build_workload, workload_options
from loadtest.workload.answers import FAILURES, GRADES, AnswerChecks, answer_columns
from loadtest.workload.build import workload_sha256
from loadtest.workload.structured import CONSTRAINT_SETS, load_tasks, resolve_constraints
from rig_helpers import REPO, first_through_the_process

_fast = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])


def build(constraints: str = "json", requests: int = 6, regex_as: str = "structured_outputs",
          api: str = "chat", **given: str):
    source = workload_options(SimpleNamespace(workload="structured", constraints=constraints,
                                              **given))
    return build_workload("mixed", requests, api=api, model="m", max_tokens=64, source=source,
                          regex_as=regex_as)


def bodies(workload) -> list[dict]:
    return [json.loads(spec.body) for spec in workload.specs]


@pytest.mark.parametrize("name", [name for name in CONSTRAINT_SETS if name != "graded"])
def test_each_shipped_set_sends_its_constraint_in_the_engines_fields(name: str):
    workload = build(name, requests=12)
    sent = bodies(workload)
    tasks, _ = load_tasks(resolve_constraints(name))
    assert [b["messages"][-1]["content"] for b in sent[:len(tasks)]] == [t.prompt for t in tasks]
    field = {"json": "response_format", "regex": "structured_outputs", "tools": "tools",
             "tools-graded": "tools"}[name]
    assert all(field in body for body in sent)
    assert workload.source == "structured" and workload.answers is not None
    assert workload.columns["constrained"] is True and workload.name == f"structured-{name}-12x64"
    if name == "json":
        assert sent[0]["response_format"]["type"] == "json_schema"
    if name.startswith("tools"):  # the right call is the rig's to check: never sent
        assert {b["tool_choice"] for b in sent} == {"required"} and not any("call" in b for b in sent)
        assert {b["parallel_tool_calls"] for b in sent} == {False}


def test_the_unconstrained_baseline_sends_the_same_prompts_bare_and_checks_nothing():
    constrained, bare = build("tools"), build("tools", constrain="off")
    assert [b["messages"] for b in bodies(bare)] == [b["messages"] for b in bodies(constrained)]
    assert not any("tools" in b for b in bodies(bare)) and bare.answers is None
    assert bare.sha256 != constrained.sha256 and bare.name.endswith("-unconstrained")
    assert bare.columns["constrained"] is False


def test_regex_goes_in_sglangs_field_and_an_engine_without_one_refuses_it():
    assert bodies(build("regex", regex_as="regex"))[0]["regex"] == "[0-9]{4}-[0-9]{2}-[0-9]{2}"
    # every shipped regex task has its GBNF twin, for llama.cpp
    assert all(b["grammar"].startswith("root ::= ") for b in bodies(build("regex", regex_as="grammar")))
    with pytest.raises(WorkloadError, match="takes no regex constraint"):
        build("regex", regex_as="")


def test_llamacpp_takes_a_regex_tasks_grammar_twin_and_refuses_one_without(tmp_path: Path):
    """llama.cpp takes GBNF, not regexes: a task's `grammar` goes in its `grammar` field, the
    answer still checked against the regex; a task with no twin is refused before sending."""
    think = build(str(REPO / "tests" / "data" / "reasoning-regex.jsonl"), regex_as="grammar")
    [body] = bodies(think)[:1]
    assert body["grammar"].startswith("root ::= ") and "structured_outputs" not in body
    assert think.answers.verdict("think", "<think>abcdefghijklmnopq</think>done", []) == "valid"
    bare = tmp_path / "bare.jsonl"
    bare.write_text(json.dumps({"id": "d", "prompt": "A date?", "regex": "[0-9]{4}"}) + "\n")
    with pytest.raises(WorkloadError, match="takes a grammar .GBNF., not a regex: give the task"):
        build(str(bare), regex_as="grammar")


def test_the_source_sends_chat_and_its_options_are_its_own():
    with pytest.raises(WorkloadError, match="add --api chat"):
        build("json", api="completions")
    for options in ({"constraints": "json"}, {"constrain": "off"}):
        with pytest.raises(WorkloadError, match="are for --workload structured"):
            workload_options(SimpleNamespace(workload="synthetic", **options))
    with pytest.raises(WorkloadError, match="--constrain 'maybe'"):
        build("json", constrain="maybe")


@pytest.mark.parametrize("given", [{}, {"constrain": "off"}, {"constraints": "tools"}])
def test_the_hash_is_known_without_building(given: dict):
    source = workload_options(SimpleNamespace(workload="structured", **given))
    assert build(**{"constraints": "json", **given}).sha256 == workload_sha256(
        "mixed", 6, max_tokens=64, source=source)


# --- answers ------------------------------------------------------------------------------------

CHECKS = AnswerChecks([task for name in CONSTRAINT_SETS
                       for task in load_tasks(resolve_constraints(name))[0]])
WEATHER = '{"city": "Lisbon", "unit": "celsius"}'


def _call(name: str | None, arguments: str, index: int = 0) -> list[dict]:
    """A call as OpenAI streams it: the name once, the arguments in pieces."""
    head = {"index": index, "id": f"c{index}", "type": "function",
            "function": {"name": name, "arguments": ""}}
    return [head, *({"index": index, "function": {"arguments": arguments[i:i + 3]}}
                    for i in range(0, len(arguments), 3))]


@pytest.mark.parametrize("task, text, calls, verdict", [
    ("sentiment", '{"label": "mixed", "confidence": 0.8, "aspects": ["battery"]}', [], "valid"),
    ("sentiment", '{"label": "mixed", "confidence": 0.8', [], "not_json"),
    ("sentiment", '{"label": "angry", "confidence": 0.8, "aspects": []}', [], "schema"),
    ("sentiment", '{"label": "mixed", "confidence": 0.8, "aspects": [], "extra": 1}', [], "schema"),
    ("invoice", '{"vendor": "ACME\x0f", "invoice_number": "1", "total": 1, "currency": "EUR", '
                '"paid": true}', [], "not_json"),  # a raw control character: not JSON
    ("iso-date", "1969-07-20", [], "valid"),
    ("iso-date", "1969-07-20 ", [], "no_match"),
    ("yes-no", "yes", [], "valid"),
    ("weather", "", _call("get_weather", WEATHER), "correct"),  # the task's right call
    ("weather", "", _call("get_weather", '{"city": "Porto", "unit": "celsius"}'), "wrong"),
    ("calendar", "", _call("list_events", '{"day": "2027-02-11"}'), "valid"),  # not graded
    ("weather", "It is sunny.", [], "no_tool_call"),
    ("weather", "", _call("get_time", WEATHER), "unknown_tool"),
    ("weather", "", _call("get_weather", '{"city": '), "bad_arguments"),
    ("weather", "", _call("get_weather", '["Lisbon"]'), "bad_arguments"),
    ("weather", "", _call("get_weather", '{"city": "Lisbon"}'), "arguments_schema"),
    ("weather", "", _call("get_weather", WEATHER) + _call("get_weather", WEATHER, 1),
     "extra_tool_calls"),
    ("flights", "", _call("search_flights", '{"origin": "OSL", "destination": "MAD", '
                                            '"date": "2027-02-11", "passengers": 2}'), "correct"),
    ("flights", "", _call("search_flights", '{"origin": "Oslo", "destination": "MAD", '
                                            '"date": "2027-02-11"}'), "arguments_schema"),
])
def test_each_answer_is_valid_or_names_why_not(task: str, text: str, calls: list, verdict: str):
    assert verdict in ("valid", *FAILURES, *GRADES)
    assert CHECKS.verdict(task, text, calls) == verdict


def _record(task: str, text: str, finish: str = "stop", **fields) -> RequestRecord:
    record = RequestRecord(0, task, 0.0, 0, output_text=[text[:5], text[5:]], finish_reason=finish)
    for name, value in fields.items():
        setattr(record, name, value)
    return record


def test_a_cut_answer_is_the_budgets_failure_and_the_row_counts_each_reason():
    records = [_record("iso-date", "1969-07-20"), _record("iso-date", "1969-0", "length"),
               _record("sentiment", '{"label": 1}'), _record("yes-no", "maybe"),
               _record("iso-date", "1969-07-20", "length"),  # valid at the limit: valid
               _record("yes-no", "no").fail("truncated", "cut"),  # failed: not checked
               _record("iso-date", "<think>...", reasoning_chunks=3),  # split by a parser
               _record("weather", "It is sunny and", "length")]  # text, no call: not cut
    for record in records:
        CHECKS.check(record)
    assert [r.answer_check for r in records] == ["valid", "cut", "schema", "no_match", "valid",
                                                 None, None, "no_tool_call"]
    assert all(r.output_text is None and r.tool_calls is None for r in records)
    assert answer_columns(records) == {"answers_checked": 6, "answers_valid": 2,
                                       "answers_valid_pct": 100 * 2 / 6,
                                       "answer_failures": "cut=1;no_match=1;no_tool_call=1;schema=1"}
    assert answer_columns([RequestRecord(0, "p", 0.0, 0)]) == {}


def test_kept_outputs_keep_their_text_after_the_check():
    record = _record("yes-no", "no")
    CHECKS.check(record, keep_text=True)
    assert record.answer_check == "valid" and record.output_text == ["no", ""]


def test_a_kept_tools_answer_keeps_its_whole_calls_in_outputs_jsonl(tmp_path: Path):
    """--keep-outputs: a tools answer's text is often empty; what it said is its calls, joined
    from the streamed fragments by index, written beside the text."""
    streamed = [{"index": 0, "function": {"name": "get_weather", "arguments": '{"city": "Lis'}},
                {"index": 0, "function": {"arguments": 'bon", "unit": "celsius"}'}}]
    kept = _record("weather", "", tool_calls=list(streamed))
    dropped = _record("weather", "", tool_calls=list(streamed))
    CHECKS.check(kept, keep_text=True)
    CHECKS.check(dropped)
    assert kept.answer_check == dropped.answer_check == "correct"  # the weather task grades its call
    assert dropped.tool_calls is None
    write_outputs(tmp_path / "outputs.jsonl", [kept, _record("yes-no", "no")])
    rows = [json.loads(line) for line in (tmp_path / "outputs.jsonl").read_text().splitlines()]
    assert rows[0]["tool_calls"] == [{"name": "get_weather",
                                      "arguments": '{"city": "Lisbon", "unit": "celsius"}'}]
    assert "tool_calls" not in rows[1]


# --- bad task files -----------------------------------------------------------------------------

GOOD = {"id": "t", "prompt": "Say a date.", "regex": "[0-9]{4}"}
TOOLS = {"id": "c", "prompt": "Count to two.", "tools": [{"type": "function", "function": {
    "name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}},
                                "additionalProperties": False}}}]}
BAD_TASKS = [
    ("not json at all", "not a JSON object"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({"prompt": "x"}), "give exactly one of"),
    (json.dumps({**GOOD, "json_schema": {"type": "object"}}), "give exactly one of"),
    (json.dumps({**GOOD, "prompt": " "}), "prompt must be a non-empty text"),
    (json.dumps({**GOOD, "id": 7}), "id must be a text"),
    (json.dumps({**GOOD, "extra": 1}), "unknown field 'extra'"),
    (json.dumps({**GOOD, "regex": "([0-9]"}), "regex does not compile"),
    (json.dumps({**GOOD, "regex": ""}), "regex must be a non-empty text"),
    (json.dumps({**GOOD, "tool_choice": "auto"}), "tool_choice is for a task with tools"),
    (json.dumps({**GOOD, "grammar": "start ::= [0-9]"}), "grammar must be GBNF text with a rule `root"),
    (json.dumps({**GOOD, "grammar": ["root ::= x"]}), "grammar must be GBNF text"),
    (json.dumps({"prompt": "x", "json_schema": {}, "grammar": "root ::= x"}),
     "grammar is the GBNF twin of a task's regex"),
    (json.dumps({"prompt": "x", "json_schema": {"type": "nothing"}}), "not a valid JSON schema"),
    (json.dumps({"prompt": "x", "json_schema": {"properties": {"a": {"minLength": -1}}}}),
     "not a valid JSON schema"),
    (json.dumps({"prompt": "x", "json_schema": {"pattern": "(["}}), "not a valid JSON schema"),
    (json.dumps({"prompt": "x", "json_schema": "object"}), "must be a JSON object"),
    (json.dumps({"prompt": "x", "json_schema": {"properties": {"a": {"$ref": "#/$defs/b"}}}}),
     "a $ref the rig cannot resolve"),
    (json.dumps({"prompt": "x", "json_schema": {"$ref": "https://example.com/s.json"}}),
     "a $ref the rig cannot resolve"),
    (json.dumps({"prompt": "x", "tools": []}), "tools must be a non-empty list"),
    (json.dumps({"prompt": "x", "tools": [{"type": "function"}]}), "tools[0] must be"),
    (json.dumps({"prompt": "x", "tools": [{"type": "function", "function": {"name": "a b"}}]}),
     "function.name must be"),
    (json.dumps({"prompt": "x", "tools": [{"type": "function", "function": {"name": "f"}}] * 2}),
     "declared twice"),
    (json.dumps({"prompt": "x", "tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": 3}}}]}), "function.parameters is not a valid"),
    (json.dumps({"prompt": "x", "tools": [{"type": "function", "function": {"name": "f"}}],
                 "tool_choice": "sometimes"}), "tool_choice must be one of"),
    (json.dumps({"prompt": "x", "tools": [{"type": "function", "function": {"name": "f"}}],
                 "parallel_tool_calls": "no"}), "parallel_tool_calls must be true or false"),
    (json.dumps({**GOOD, "call": {"name": "f", "arguments": {}}}), "call is for a task with tools"),
    *((json.dumps({**TOOLS, "call": call}), message) for call, message in (
        ("f", "call must be"), ({"name": "f"}, "call must be"),
        ({"name": "f", "arguments": {}, "id": 1}, "call must be"),
        ({"name": "g", "arguments": {}}, "call.name must be one of the task's tools (f)"),
        ({"name": "f", "arguments": []}, "call.arguments must be a JSON object"),
        ({"name": "f", "arguments": {"n": "two"}}, "call.arguments do not fit f's parameters"))),
]


@pytest.mark.parametrize("line, message", BAD_TASKS)
def test_a_bad_task_is_one_line_naming_its_file_and_line(line: str, message: str, tmp_path: Path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + line + "\n")
    with pytest.raises(WorkloadError) as caught:
        load_tasks(path)
    assert message in str(caught.value)
    assert str(caught.value).startswith(f"{path}:2: ") and "\n" not in str(caught.value)


@pytest.mark.parametrize("content, message", [
    (b"", "no tasks"), (b"\n \n", "no tasks"), (b"\xff\xfe{}", "not UTF-8"),
    ((json.dumps(GOOD) + "\n") .encode() * 2, "the id 't' is given twice"),
])
def test_a_bad_task_file_is_one_line(content: bytes, message: str, tmp_path: Path):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(content)
    with pytest.raises(WorkloadError, match=message):
        load_tasks(path)
    with pytest.raises(WorkloadError, match="no such file"):
        resolve_constraints(str(tmp_path / "absent.jsonl"))


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                     | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=12)
def test_a_schema_may_refer_to_its_own_definitions(tmp_path: Path):
    schema = {"$defs": {"unit": {"enum": ["c", "f"]}}, "type": "object",
              "properties": {"unit": {"$ref": "#/$defs/unit"}}, "required": ["unit"]}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"id": "u", "prompt": "x", "json_schema": schema}) + "\n")
    checks = AnswerChecks(load_tasks(path)[0])
    assert checks.verdict("u", '{"unit": "c"}', []) == "valid"
    assert checks.verdict("u", '{"unit": "k"}', []) == "schema"


_TASK_KEYS = st.sampled_from(["id", "prompt", "system", "json_schema", "regex", "tools",
                              "tool_choice", "parallel_tool_calls", "grammar", "call", "other"])


@given(line=st.one_of(
    st.text(max_size=40),
    st.dictionaries(_TASK_KEYS, _JSON, max_size=5).map(json.dumps),
    st.fixed_dictionaries({"prompt": st.just("x")},
                          optional={"json_schema": _JSON, "tools": _JSON, "regex": _JSON,
                                    "tool_choice": _JSON,
                                    "grammar": _JSON | st.just("root ::= [a-z]+")}).map(json.dumps),
    # a tools task with a generated call: one of its tool's names or not, any arguments
    (st.fixed_dictionaries({"call": st.fixed_dictionaries(
        {"name": st.sampled_from(["f", "g"]) | _JSON, "arguments": _JSON})}) | st.just({})
     ).map(lambda extra: json.dumps({**TOOLS, **extra}))))
@_fast
def test_any_task_line_is_a_task_or_one_line_error(line: str, tmp_path: Path):
    """Generated lines: each makes a task whose request builds and whose answer can be checked,
    or is refused in one line; nothing else escapes."""
    path = tmp_path / "tasks.jsonl"
    path.write_text(line.replace("\n", " ") + "\n", encoding="utf-8", errors="surrogatepass")
    try:
        tasks, _ = load_tasks(path)
    except WorkloadError as exc:
        assert "\n" not in str(exc)
        return
    checks = AnswerChecks(tasks)
    for task in tasks:
        for regex_as in ("structured_outputs", "grammar"):
            try:
                json.dumps(task.request_fields(regex_as))
            except WorkloadError as exc:  # a regex task without a grammar twin, for llama.cpp
                assert regex_as == "grammar" and "\n" not in str(exc)
        assert checks.verdict(task.task_id, "{}", []) in ("valid", *FAILURES)


@pytest.mark.parametrize("args, message, locust", first_through_the_process([
    (("--workload", "structured", "--constraints", "/nonexistent/t.jsonl", "--api", "chat"),
     "--constraints '/nonexistent/t.jsonl'"),
    (("--workload", "structured", "--constrain", "no", "--api", "chat"), "--constrain 'no'"),
    (("--workload", "prompts", "--constraints", "json"), "are for --workload structured"),
    (("--workload", "structured", "--constraints", "BAD", "--api", "chat"),
     "not a valid JSON schema"),
]))
def test_the_locustfile_refuses_a_bad_structured_workload_in_one_line(args, message: str, locust,
                                                                     tmp_path: Path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "x", "json_schema": {"type": "objekt"}}) + "\n")
    result = locust("--out", str(tmp_path / "out"), *(str(bad) if a == "BAD" else a for a in args))
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_tools_task_with_its_right_call_is_graded_and_its_validity_still_counted(tmp_path: Path):
    """One call of the right tool with the right arguments (as JSON values) is correct; a valid
    call of another tool or with other arguments, or two calls, is wrong; an invalid one keeps
    its reason. The row counts each as graded and, apart, valid or not."""
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({**TOOLS, "call": {"name": "f", "arguments": {"n": 2}}}) + "\n")
    tasks, _ = load_tasks(path)
    checks = AnswerChecks(tasks)
    answers = {"right": _call("f", '{"n": 2}'), "spaced": _call("f", '{ "n" :2 }'),
               "other_value": _call("f", '{"n": 3}'), "two": _call("f", '{"n": 2}') + _call("f", '{"n": 2}', 1),
               "no_call": [], "bad": _call("f", '{"n": "2"}')}
    records = []
    for calls in answers.values():
        record = RequestRecord(0, "c", 0.0, 0, output_text=[""], finish_reason="tool_calls",
                               tool_calls=calls)
        checks.check(record)
        records.append(record)
    assert [r.answer_check for r in records] == [
        "correct", "correct", "wrong", "wrong", "no_tool_call", "arguments_schema"]
    assert checks.graded == checks.called == {"c"}
    assert answer_columns(records, checks.graded, checks.called) == {
        "answers_checked": 6, "answers_valid": 4, "answers_valid_pct": 400 / 6,
        "answer_failures": "arguments_schema=1;no_tool_call=1",
        "answers_graded": 6, "answers_correct": 2, "answers_correct_pct": 200 / 6, "answers_wrong": "c=4"}


def test_the_shipped_tools_tasks_grade_the_calls_that_have_one_right_answer():
    tasks, _ = load_tasks(resolve_constraints("tools-graded"))
    plain, _ = load_tasks(resolve_constraints("tools"))  # the same tasks, ungraded
    assert [t.prompt for t in tasks] == [t.prompt for t in plain] and not any(t.call for t in plain)
    assert {t.task_id: t.call["name"] for t in tasks if t.call} == {
        "weather": "get_weather", "flights": "search_flights", "support": "refund_order"}
