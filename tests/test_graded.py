"""The graded task set (loadtest/workload/graded.py writes loadtest/prompts/graded.jsonl) and its
grading (loadtest/workload/answers.py): the shipped file is the generator's, requests carry no
constraint, each answer is graded by one rule, and the row names the tasks answered wrong.
Fast: no engine (tests/test_smollm2_engine.py grades a real model's answers)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from loadtest.results.record import RequestRecord
from loadtest.workload import build_workload, workload_options
from loadtest.workload.answers import MAX_WRONG_SHOWN, answer_columns, graded_verdict
from loadtest.workload.graded import graded_tasks
from loadtest.workload.structured import load_tasks, resolve_constraints

SHIPPED = resolve_constraints("graded")


def test_the_shipped_set_is_what_the_generator_writes():
    lines = SHIPPED.read_text(encoding="utf-8").splitlines()
    assert lines == [json.dumps(task) for task in graded_tasks()], (
        "run: python -m loadtest.workload.graded > loadtest/prompts/graded.jsonl")
    tasks, _ = load_tasks(SHIPPED)
    assert len(tasks) >= 200 and {task.kind for task in tasks} == {"answer"}


def _build(requests: int, **given: str):
    source = workload_options(SimpleNamespace(workload="structured", constraints="graded", **given))
    return build_workload("mixed", requests, api="chat", model="m", max_tokens=16, source=source)


def test_graded_requests_carry_no_constraint_and_are_graded_with_or_without_constrain():
    tasks, _ = load_tasks(SHIPPED)
    for workload in (_build(len(tasks)), _build(len(tasks), constrain="off")):
        bodies = [json.loads(spec.body) for spec in workload.specs]
        assert [b["messages"] for b in bodies] == [[{"role": "user", "content": t.prompt}] for t in tasks]
        assert not any({"response_format", "tools", "structured_outputs", "grammar"} & set(b) for b in bodies)
        assert workload.answers is not None and workload.answers.graded == {t.task_id for t in tasks}
    assert _build(8).columns["constraint_kinds"] == "answer"


# an answer starts and ends with a letter or digit (a number, a name, a code, an address)
_answers = st.from_regex(r"[^\W_]([^\s\"'`*]{0,18}[^\W_])?", fullmatch=True)


@given(_answers, st.sampled_from(["{}", "{}.", " {} \n", "\"{}\"", "**{}**", "`{}`", "**\"{}.\"**", "'{}'."]))
def test_an_answer_wrapped_in_quotes_bold_or_a_final_period_is_correct(answer: str, shape: str):
    assert graded_verdict(answer, shape.format(answer)) == "correct"


@given(_answers, st.sampled_from(["The answer is {}.", "It is: **{}**", "The number is \"{}\"."]))
def test_a_sentence_that_ends_with_the_answer_is_correct(answer: str, shape: str):
    assert graded_verdict(answer, shape.format(answer)) == "correct"


@given(_answers, st.sampled_from(["{} and more", "{}{}", "{}!", "-{}", "x{}", "a.{}", "{} is it."]))
def test_an_answer_that_does_not_end_on_the_answer_alone_is_wrong(answer: str, shape: str):
    assert graded_verdict(answer, shape.format(answer, answer)) == "wrong"


def test_the_rule_on_answers_a_small_model_gave():
    assert graded_verdict("13374", "The order number is 13374.") == "correct"
    assert graded_verdict("Moscow", "The capital of Russia is Moscow.") == "correct"
    assert graded_verdict("Tuesday", "The day after Monday is Friday.") == "wrong"
    assert graded_verdict("10", "5 + 5 = 11") == "wrong"
    assert graded_verdict("13374", "The order number is 113374.") == "wrong"
    assert graded_verdict("Lisbon", "The capital of Portugal is Lisbon, not Portugal.") == "wrong"
    assert graded_verdict("BRIDGE", "bridge") == "wrong" and graded_verdict("Paris", "paris") == "wrong"


def _graded(task: str, text: str, finish: str = "stop") -> RequestRecord:
    return RequestRecord(0, task, 0.0, 0, output_text=[text], finish_reason=finish)


def test_the_row_counts_correct_answers_and_names_the_tasks_answered_wrong():
    workload = _build(8)
    checks = workload.answers
    assert checks is not None
    tasks, _ = load_tasks(SHIPPED)
    first, second = tasks[0], tasks[1]
    records = [_graded(first.task_id, first.constraint), _graded(first.task_id, "no"),
               _graded(first.task_id, "nope"), _graded(second.task_id, "x" * 40, "length"),
               _graded(second.task_id, second.constraint, "length")]
    for record in records:
        checks.check(record)
    assert [r.answer_check for r in records] == ["correct", "wrong", "wrong", "cut", "correct"]
    assert answer_columns(records, checks.graded) == {
        "answers_graded": 5, "answers_correct": 2, "answers_correct_pct": 40.0,
        "answers_wrong": ";".join(sorted([f"{first.task_id}=2", second.task_id]))}


def test_a_long_list_of_wrong_tasks_is_cut_and_says_how_many_more():
    ids = [f"t{i:03d}" for i in range(MAX_WRONG_SHOWN + 5)]
    records = [_graded(i, "x") for i in ids]
    for record in records:
        record.answer_check = "wrong"
    wrong = answer_columns(records, set(ids))["answers_wrong"]
    assert wrong.split(";")[-1] == "+5 more" and wrong.split(";")[:-1] == ids[:MAX_WRONG_SHOWN]
