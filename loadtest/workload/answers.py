"""Each constrained or graded answer checked (loadtest/workload/structured.py's tasks), and the
run's counts.

A constrained answer's `answer_check` (requests.jsonl) is "valid" or the first reason it is not,
from FAILURES:

    cut              the engine stopped at max_tokens (finish_reason "length") with an answer
                     that is not yet valid: the token budget's failure, not the constraint's
                     (a tools answer without any call is no_tool_call all the same)
    not_json         a JSON-schema answer that does not parse as JSON
    schema           it parses but does not fit the schema
    no_match         a regex answer that the regex does not match in full
    no_tool_call     a tools answer without a tool call
    extra_tool_calls more than one call where the request said parallel_tool_calls false
    unknown_tool     a tool call naming a tool the request did not declare
    bad_arguments    a tool call whose arguments are not a JSON object
    arguments_schema arguments that do not fit the tool's parameters

A graded answer's (a task with an `answer`, or a tools task with its one right `call`) is
"correct", "wrong", or "cut" (a wrong answer that the engine stopped at max_tokens). Once the
whitespace around it, quotes, backticks or bold marks wrapped around it and one final period are
taken off, a text answer is correct when it is the task's answer, case and all, or ends with it
as its last word(s): `Paris`, `**"Paris."**` and `The capital of France is Paris.` are correct;
`Paris is the capital.`, `paris` and `The order number is 113374` (for 13374) are wrong. The
last words, as a sentence ends on what it answers: a small instruct model says `The order number
is 13374.` where the prompt asks for the number only.
A valid tools answer is correct when it is exactly one call, of the right tool, whose arguments
are the right call's as JSON values (key order and spacing aside); one that is not even valid
keeps its reason from FAILURES (not correct either).

A regex answer whose stream the engine split into reasoning and answer (a reasoning parser
took the regex's markers out) is left unchecked. The check runs in the process that read the
answer, off the request's path (after its record is complete, before it is counted), so it
needs the answer's text only there.
The row (answer_columns): answers_checked (completed requests with a constrained answer),
answers_valid, answers_valid_pct, answer_failures (reason=count joined with ;); and for graded
answers answers_graded, answers_correct, answers_correct_pct and answers_wrong (the tasks answered
wrong or cut: id, or id=count where a task was asked more than once, joined with ;). A graded
tools answer counts in both: valid (correct or wrong) or not, and correct or not.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from loadtest.results.record import RequestRecord
from loadtest.workload.structured import Task

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

__all__ = ["FAILURES", "GRADES", "AnswerChecks", "answer_columns", "graded_verdict"]

FAILURES = ("cut", "not_json", "schema", "no_match", "no_tool_call", "extra_tool_calls",
            "unknown_tool", "bad_arguments", "arguments_schema")
GRADES = ("correct", "wrong", "cut")
_WRAPPERS = "\"'`*"  # taken off both ends of a graded answer
_JOINERS = "-_.@"  # before the answer, they make it the end of another word (X-13374, a.b@c)
MAX_WRONG_SHOWN = 40  # answers_wrong names this many tasks, then how many more


class AnswerChecks:
    """The checks of a workload's tasks, by prompt id (a task's id), compiled once."""

    def __init__(self, tasks: Sequence[Task]) -> None:
        from jsonschema import Draft202012Validator  # imported by the one source that needs it

        self._tasks = {task.task_id: task for task in tasks}
        self._schemas: dict[str, Draft202012Validator] = {}
        self._patterns: dict[str, re.Pattern[str]] = {}
        self._tools: dict[str, dict[str, Draft202012Validator]] = {}
        self._answers = {task.task_id: task.constraint for task in tasks if task.kind == "answer"}
        self._single = {task.task_id for task in tasks if task.parallel_tool_calls is False}
        self._calls = {task.task_id: task.call for task in tasks if task.call is not None}
        for task in tasks:
            if task.kind == "json_schema":
                self._schemas[task.task_id] = Draft202012Validator(task.constraint)
            elif task.kind == "regex":
                self._patterns[task.task_id] = re.compile(task.constraint)
            elif task.kind == "tools":
                self._tools[task.task_id] = {
                    tool["function"]["name"]: Draft202012Validator(
                        tool["function"].get("parameters", {"type": "object"}))
                    for tool in task.constraint}

    def check(self, record: RequestRecord, keep_text: bool = False) -> None:
        """Set a completed record's answer_check; drop its text unless it is to be kept."""
        # A regex answer that the engine split into reasoning and answer cannot be checked:
        # its parser took out the text the regex matched (the reasoning markers).
        split = record.reasoning_chunks and record.prompt_id in self._patterns
        if record.ok and record.prompt_id in self._tasks and not split:
            verdict = self.verdict(record.prompt_id, "".join(record.output_text or ()),
                                   record.tool_calls or [])
            # Cut at max_tokens, an answer is the budget's failure, not the constraint's; a
            # tools answer that streamed text and no call at all was no call on its way.
            if verdict not in ("valid", "correct", "no_tool_call") and record.finish_reason == "length":
                verdict = "cut"
            record.answer_check = verdict
        # kept with the text (--keep-outputs) as whole calls: what a tools answer said
        record.tool_calls = ([{"name": name, "arguments": arguments}
                              for name, arguments in _joined_calls(record.tool_calls)]
                             if keep_text and record.tool_calls else None)
        if not keep_text:
            record.output_text = None

    def verdict(self, task_id: str, text: str, tool_calls: list[dict[str, Any]]) -> str:
        """'valid' or the reason an answer to task `task_id` is not (FAILURES); a graded
        task's 'correct' or 'wrong'."""
        if task_id in self._answers:
            return graded_verdict(self._answers[task_id], text)
        if task_id in self._patterns:
            return "valid" if self._patterns[task_id].fullmatch(text) else "no_match"
        if task_id in self._schemas:
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):
                return "not_json"
            return "valid" if _fits(self._schemas[task_id], value) else "schema"
        calls = _joined_calls(tool_calls)
        if len(calls) > 1 and task_id in self._single:
            return "extra_tool_calls"
        verdict = _tool_verdict(self._tools[task_id], calls)
        if verdict != "valid" or task_id not in self._calls:
            return verdict
        return "correct" if _is_call(self._calls[task_id], calls) else "wrong"


    @property
    def graded(self) -> frozenset[str]:
        """The ids of the graded tasks (those with an answer or a right call)."""
        return frozenset(self._answers) | frozenset(self._calls)

    @property
    def called(self) -> frozenset[str]:
        """The ids of the graded tools tasks (their answers are constrained too)."""
        return frozenset(self._calls)


def graded_verdict(expected: str, text: str) -> str:
    """'correct' where `text` is, or ends with, the answer `expected` (see the module's
    docstring), else 'wrong'."""
    answer, expected = text.strip(), expected.strip()
    for _ in range(3):  # **"Paris."**: bold around quotes around the answer and its period
        answer = answer.strip(_WRAPPERS).strip()
        answer = answer[:-1].rstrip() if answer.endswith(".") and not expected.endswith(".") else answer
    if answer == expected:
        return "correct"
    before = answer[-len(expected) - 1] if len(answer) > len(expected) else ""
    ends = answer.endswith(expected) and not (before.isalnum() or before in _JOINERS)
    return "correct" if ends else "wrong"


def answer_columns(records: Sequence[RequestRecord], graded: Collection[str] = (),
                   called: Collection[str] = ()) -> dict[str, Any]:
    """The row's counts of checked answers, constrained and `graded` (task ids) apart, the
    graded tools tasks (`called`) in both; {} for a run whose answers were not checked."""
    checked = [r for r in records if r.ok and r.answer_check is not None]
    constrained = ["valid" if r.answer_check in ("correct", "wrong") else str(r.answer_check)
                   for r in checked if r.prompt_id not in graded or r.prompt_id in called]
    columns: dict[str, Any] = {}
    if constrained:
        valid = constrained.count("valid")
        columns.update(answers_checked=len(constrained), answers_valid=valid,
                       answers_valid_pct=100.0 * valid / len(constrained),
                       answer_failures=_joined(Counter(c for c in constrained if c != "valid")))
    grades = [r for r in checked if r.prompt_id in graded]
    if grades:
        correct = sum(1 for r in grades if r.answer_check == "correct")
        wrong = Counter(r.prompt_id for r in grades if r.answer_check != "correct")
        columns.update(answers_graded=len(grades), answers_correct=correct,
                       answers_correct_pct=100.0 * correct / len(grades),
                       answers_wrong=_wrong_tasks(wrong))
    return columns


def _joined(counts: Counter[str]) -> str:
    return ";".join(f"{k}={v}" for k, v in sorted(counts.items()))


def _wrong_tasks(wrong: Counter[str]) -> str:
    """The tasks answered wrong, by id (=count where more than once); the first MAX_WRONG_SHOWN."""
    names = [k if v == 1 else f"{k}={v}" for k, v in sorted(wrong.items())]
    shown = ";".join(names[:MAX_WRONG_SHOWN])
    return shown + (f";+{len(names) - MAX_WRONG_SHOWN} more" if len(names) > MAX_WRONG_SHOWN else "")


def _joined_calls(fragments: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """A stream's tool-call fragments joined into whole calls: (name, arguments text) by index.
    OpenAI streams a call's name once and its arguments in pieces, each fragment naming the
    call's index."""
    calls: dict[int, list[str]] = {}
    for fragment in fragments:
        index = fragment.get("index", 0)
        index = index if type(index) is int else 0
        function = fragment.get("function")
        function = function if isinstance(function, dict) else {}
        call = calls.setdefault(index, ["", ""])
        name, arguments = function.get("name"), function.get("arguments")
        if isinstance(name, str):
            call[0] += name
        if isinstance(arguments, str):
            call[1] += arguments
    return [(name, arguments) for _, (name, arguments) in sorted(calls.items())]


def _tool_verdict(tools: dict[str, Draft202012Validator], calls: list[tuple[str, str]]) -> str:
    if not calls:
        return "no_tool_call"
    for name, arguments in calls:
        if name not in tools:
            return "unknown_tool"
        try:
            value = json.loads(arguments or "{}")
        except (ValueError, RecursionError):
            return "bad_arguments"
        if not isinstance(value, dict):
            return "bad_arguments"
        if not _fits(tools[name], value):
            return "arguments_schema"
    return "valid"


def _is_call(right: dict[str, Any], calls: list[tuple[str, str]]) -> bool:
    """One call (already valid), the right tool, arguments equal as JSON values."""
    if len(calls) != 1 or calls[0][0] != right["name"]:
        return False
    return json.loads(calls[0][1] or "{}") == right["arguments"]


def _fits(validator: Draft202012Validator, value: Any) -> bool:
    try:
        return validator.is_valid(value)
    except RecursionError:
        return False
