"""Structured output and tool calls: requests whose answer is constrained, each answer checked.

    --workload structured --constraints json|regex|tools|tools-graded|graded|FILE.jsonl --api chat

A constraints file is JSON Lines, one task a line, requests cycling through them in order:

    {"id": "invoice", "prompt": "...", "json_schema": {...}}      a JSON-schema answer
    {"id": "iso-date", "prompt": "...", "regex": "..."}            an answer matching a regex
    {"id": "iso-date", "prompt": "...", "regex": "...", "grammar": "root ::= ..."}
                                                                   the same, and its language in
                                                                   GBNF for engines that take a
                                                                   grammar, not a regex (llama.cpp)
    {"id": "weather", "prompt": "...", "tools": [...], "tool_choice": "required",
     "parallel_tool_calls": false}                                 a tool call (OpenAI tools)
    {"id": "weather", "prompt": "...", "tools": [...],
     "call": {"name": "get_weather", "arguments": {...}}}          the same, graded: the one
                                                                   right call (answers.py)
    {"id": "capital-03", "prompt": "...", "answer": "Paris"}       no constraint: one right
                                                                   answer, graded (answers.py)

`id` is optional (default: the line's number), `system` an optional system message, and
`tool_choice` (required or auto) and `parallel_tool_calls` are sent as given with tools; a file
may mix kinds. The rig ships a small,
realistic set of each (loadtest/prompts/structured-*.jsonl), and a graded set
(`--constraints graded`: loadtest/prompts/graded.jsonl, written by graded.py) whose answers a
real small model gets right alone, so that a score that falls under load is measured. Every
schema, regex and tool is
checked before anything is sent, so a bad file is one `error:` line, never a failed run; each
answer is then checked (loadtest/workload/answers.py) and counted in the row.

How each constraint reaches the engine: a JSON schema as OpenAI's `response_format`
(`json_schema`), tools as OpenAI's `tools` and `tool_choice` (all the OpenAI-compatible engines
that constrain answers take these), a regex in the engine's own field (REGEX_FIELDS: vLLM's
`structured_outputs`, SGLang's `regex`), or, for an engine that takes grammars only (llama.cpp's
`grammar`, GBNF), the task's `grammar`: the same language written as a grammar, the answer still
checked against the regex (so a grammar that strays from it shows as `no_match`). An engine with
neither refuses a regex task before the run.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.workload.items import Context, Item
from loadtest.workload.prompts import PROMPTS_DIR
from loadtest.workload.spec import WorkloadError

__all__ = ["CONSTRAINT_SETS", "KINDS", "REGEX_FIELDS", "Task", "load_tasks", "resolve_constraints",
           "structured_items", "structured_name"]

KINDS = ("json_schema", "regex", "tools", "answer")  # answer: unconstrained, graded
# tools-graded: the tools tasks, each with its one right call where it has one (a file of its own:
# the tiny model's tokenizer is trained on structured-tools.jsonl's bytes, tests/test_tiny_model.py)
CONSTRAINT_SETS = {"json": "structured-json.jsonl", "regex": "structured-regex.jsonl",
                   "tools": "structured-tools.jsonl", "tools-graded": "structured-tools-graded.jsonl",
                   "graded": "graded.jsonl"}
# How a regex constraint is sent, by the engine's Target.regex_as ("grammar": its GBNF twin)
REGEX_FIELDS = {"structured_outputs": lambda pattern: {"structured_outputs": {"regex": pattern}},
                "regex": lambda pattern: {"regex": pattern}}
GRAMMAR_FIELD = "grammar"
_ROOT_RULE = re.compile(r"^[ \t]*root[ \t]*::=", re.MULTILINE)  # GBNF starts at the rule `root`
TOOL_CHOICES = ("required", "auto")
MAX_TASKS = 10_000
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # OpenAI's rule for a function's name
_ALLOWED = {"id", "prompt", "system", *KINDS, "tool_choice", "parallel_tool_calls", "grammar", "call"}


@dataclass(frozen=True)
class Task:
    task_id: str
    prompt: str
    kind: str  # one of KINDS
    constraint: Any  # the schema (dict), the pattern (str), the tools (list) or the answer (str)
    tool_choice: str = "required"
    system: str = ""
    parallel_tool_calls: bool | None = None  # None: not sent (the engine's default)
    grammar: str = ""  # a regex task's language in GBNF, for engines that take no regex
    call: dict[str, Any] | None = None  # a tools task's one right call: {"name", "arguments"}

    def messages(self) -> list[dict[str, str]]:
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, {"role": "user", "content": self.prompt}]

    def request_fields(self, regex_as: str) -> dict[str, Any]:
        """The body fields that constrain this task's answer, for an engine whose regex field is
        `regex_as` ("" when it takes none)."""
        if self.kind == "json_schema":
            return {"response_format": {"type": "json_schema", "json_schema": {
                "name": _schema_name(self.task_id), "schema": self.constraint, "strict": True}}}
        if self.kind == "answer":
            return {}
        if self.kind == "tools":
            fields = {"tools": self.constraint, "tool_choice": self.tool_choice}
            if self.parallel_tool_calls is not None:
                fields["parallel_tool_calls"] = self.parallel_tool_calls
            return fields
        if regex_as == GRAMMAR_FIELD and self.grammar:
            return {GRAMMAR_FIELD: self.grammar}
        if regex_as == GRAMMAR_FIELD:
            raise WorkloadError(f"task {self.task_id!r} asks for a regex-constrained answer, and "
                                "this engine takes a grammar (GBNF), not a regex: give the task "
                                "a `grammar` of the same language beside its `regex`")
        if regex_as not in REGEX_FIELDS:
            raise WorkloadError(f"task {self.task_id!r} asks for a regex-constrained answer, and "
                                "this engine takes no regex constraint: use --constraints json "
                                "or tools, or a file without regex tasks")
        return REGEX_FIELDS[regex_as](self.constraint)


def resolve_constraints(name: str) -> Path:
    """A shipped set's file (json, regex, tools) or the user's file."""
    if name in CONSTRAINT_SETS:
        return PROMPTS_DIR / CONSTRAINT_SETS[name]
    path = Path(name)
    if not path.is_file():
        raise WorkloadError(f"--constraints {name!r}: give {', '.join(CONSTRAINT_SETS)} or a "
                            "JSONL file of tasks (no such file)")
    return path


def load_tasks(path: Path) -> tuple[list[Task], str]:
    """The file's tasks, each checked, and the file's SHA-256; WorkloadError (one line naming the
    file and line) for anything that would not make a request."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    tasks: list[Task] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            tasks.append(_task(line, number, f"{path}:{number}"))
        if len(tasks) > MAX_TASKS:
            raise WorkloadError(f"{path}: over {MAX_TASKS} tasks")
    if not tasks:
        raise WorkloadError(f"{path}: no tasks (one JSON object a line)")
    seen: set[str] = set()
    for task in tasks:
        if task.task_id in seen:
            raise WorkloadError(f"{path}: the id {task.task_id!r} is given twice")
        seen.add(task.task_id)
    return tasks, hashlib.sha256(data).hexdigest()


def structured_items(tasks: list[Task], context: Context, regex_as: str) -> list[Item]:
    """One item per task (requests cycle through them), its constraint in the body's fields."""
    outputs = context.output_lengths(context.rng(_OUTPUTS), len(tasks))
    return [Item(task.task_id, task.messages(), int(out), extra=task.request_fields(regex_as))
            for task, out in zip(tasks, outputs)]


def structured_name(path: Path, context: Context) -> str:
    stem = next((k for k, v in CONSTRAINT_SETS.items() if PROMPTS_DIR / v == path), path.stem)
    return f"structured-{stem}-{context.requests}x{context.output_label}"


_OUTPUTS = 21  # the seed's stream for --output-len


def _task(line: str, number: int, where: str) -> Task:
    try:
        raw = json.loads(line)
    except (ValueError, RecursionError):
        raise WorkloadError(f"{where}: not a JSON object") from None
    if not isinstance(raw, dict):
        raise WorkloadError(f"{where}: not a JSON object")
    unknown = sorted(set(raw) - _ALLOWED)
    if unknown:
        raise WorkloadError(f"{where}: unknown field {unknown[0]!r} (fields: "
                            f"{', '.join(sorted(_ALLOWED))})")
    task_id = raw.get("id", str(number))
    if not isinstance(task_id, str) or not task_id.strip() or len(task_id) > 64:
        raise WorkloadError(f"{where}: id must be a text of 1 to 64 characters")
    prompt, system = raw.get("prompt"), raw.get("system", "")
    if not isinstance(prompt, str) or not prompt.strip():
        raise WorkloadError(f"{where}: prompt must be a non-empty text")
    if not isinstance(system, str):
        raise WorkloadError(f"{where}: system must be a text")
    kinds = [kind for kind in KINDS if kind in raw]
    if len(kinds) != 1:
        raise WorkloadError(f"{where}: give exactly one of {', '.join(KINDS)}")
    kind = kinds[0]
    choice, parallel = raw.get("tool_choice", "required"), raw.get("parallel_tool_calls")
    for name in ("tool_choice", "parallel_tool_calls", "call"):
        if name in raw and kind != "tools":
            raise WorkloadError(f"{where}: {name} is for a task with tools")
    if "grammar" in raw and kind != "regex":
        raise WorkloadError(f"{where}: grammar is the GBNF twin of a task's regex; this task has none")
    if choice not in TOOL_CHOICES:
        raise WorkloadError(f"{where}: tool_choice must be one of {', '.join(TOOL_CHOICES)}")
    if parallel is not None and type(parallel) is not bool:
        raise WorkloadError(f"{where}: parallel_tool_calls must be true or false")
    checker = {"json_schema": _schema, "regex": _regex, "tools": _tools, "answer": _answer}[kind]
    grammar = _grammar(raw["grammar"], where) if "grammar" in raw else ""
    constraint = checker(raw[kind], where)
    call = _call(raw["call"], constraint, where) if "call" in raw else None
    return Task(task_id, prompt, kind, constraint, choice, system, parallel, grammar, call)


def _schema(schema: Any, where: str, name: str = "json_schema") -> dict[str, Any]:
    from jsonschema import Draft202012Validator  # imported by the one source that needs it
    from jsonschema.exceptions import SchemaError

    if not isinstance(schema, dict):
        raise WorkloadError(f"{where}: {name} must be a JSON object (a JSON schema)")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        at = "/".join(str(p) for p in exc.path) or "its top"
        raise WorkloadError(f"{where}: {name} is not a valid JSON schema (at {at}: "
                            f"{_one_line(exc.message)})") from None
    except RecursionError:
        raise WorkloadError(f"{where}: {name} is nested too deep") from None
    for ref in _refs(schema):
        if not _resolves(schema, ref):
            raise WorkloadError(f"{where}: {name} has a $ref the rig cannot resolve ({ref[:60]!r}:"
                                " only references into the schema itself, #/...)")
    return schema


def _refs(value: Any) -> list[str]:
    """Every $ref in a schema (checked apart: jsonschema meets a bad one only while checking)."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if ref is not None:
                found.append(str(ref))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _resolves(schema: dict[str, Any], ref: str) -> bool:
    """A local JSON pointer ("#", "#/$defs/x") that names a part of the schema."""
    if not ref.startswith("#") or (len(ref) > 1 and not ref.startswith("#/")):
        return False
    node: Any = schema
    for part in ref[2:].split("/") if len(ref) > 1 else ():
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return isinstance(node, (dict, bool))


def _regex(pattern: Any, where: str) -> str:
    if not isinstance(pattern, str) or not pattern:
        raise WorkloadError(f"{where}: regex must be a non-empty text")
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise WorkloadError(f"{where}: regex does not compile ({_one_line(str(exc))})") from None
    return pattern


def _answer(answer: Any, where: str) -> str:
    if not isinstance(answer, str) or not answer.strip():
        raise WorkloadError(f"{where}: answer must be a non-empty text")
    return answer


def _grammar(grammar: Any, where: str) -> str:
    """GBNF is the engine's to parse; what is checked here is that it is one, with its `root`."""
    if not isinstance(grammar, str) or not _ROOT_RULE.search(grammar):
        raise WorkloadError(f"{where}: grammar must be GBNF text with a rule `root ::= ...`")
    return grammar


def _tools(tools: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(tools, list) or not tools:
        raise WorkloadError(f"{where}: tools must be a non-empty list")
    names: set[str] = set()
    for i, tool in enumerate(tools):
        at = f"{where}: tools[{i}]"
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or tool.get("type") != "function":
            raise WorkloadError(f"{at} must be {{\"type\": \"function\", \"function\": {{...}}}}")
        name = function.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise WorkloadError(f"{at}: function.name must be 1-64 letters, digits, _ or -")
        if name in names:
            raise WorkloadError(f"{at}: the tool {name!r} is declared twice")
        names.add(name)
        _schema(function.get("parameters", {"type": "object"}), at, "function.parameters")
    return tools


def _call(call: Any, tools: list[dict[str, Any]], where: str) -> dict[str, Any]:
    """A tools task's right call: one of its tools by name, with arguments that fit its parameters."""
    from jsonschema import Draft202012Validator  # imported by the one source that needs it

    if not isinstance(call, dict) or set(call) != {"name", "arguments"}:
        raise WorkloadError(f'{where}: call must be {{"name": ..., "arguments": {{...}}}}')
    parameters = {tool["function"]["name"]: tool["function"].get("parameters", {"type": "object"})
                  for tool in tools}
    if not isinstance(call["name"], str) or call["name"] not in parameters:
        raise WorkloadError(f"{where}: call.name must be one of the task's tools "
                            f"({', '.join(sorted(parameters))})")
    arguments = call["arguments"]
    if not isinstance(arguments, dict):
        raise WorkloadError(f"{where}: call.arguments must be a JSON object")
    try:
        fits = Draft202012Validator(parameters[call["name"]]).is_valid(arguments)
    except RecursionError:
        fits = False
    if not fits:
        raise WorkloadError(f"{where}: call.arguments do not fit {call['name']}'s parameters")
    return call


def _schema_name(task_id: str) -> str:
    """OpenAI's json_schema.name: letters, digits, _ and - only."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", task_id)[:64]


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 160 else line[:157] + "..."
