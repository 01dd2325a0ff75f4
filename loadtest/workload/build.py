"""build_workload(...): the one entry every caller uses (the locustfile's Run, sweeps, the
in-process runner, bench scripts). It checks the options, loads what the source reads,
builds the requests' bodies and names and hashes the workload.

Bodies are serialized here, once (a trace's on take: loadtest/workload/trace.py), so the hot
path only writes bytes. The hash is engine-independent: the source, its options, its files'
contents, the seed, the counts and the sampling; not the tokenizer (the lengths asked are the
same whatever text fills them; the row records tokenizer_sha256 beside it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.client.targets import dialect_for
from loadtest.workload.agentic import files_sha256, load_agentic, read_agentic
from loadtest.workload.conversations import conversation_name, conversation_sessions
from loadtest.workload.datasets import dataset_items, dataset_sessions, read_dataset
from loadtest.workload.items import Context, Item
from loadtest.workload.lora import mixed_sha256, with_adapters
from loadtest.workload.chosen import WorkloadOptions
from loadtest.workload.prefixes import prefix_items, prefix_name
from loadtest.workload.prompts import prompt_items, prompts_identity
from loadtest.workload.spec import LazySequence, RequestSpec, SessionSpec, Workload, WorkloadError
from loadtest.workload.structured import (load_tasks, resolve_constraints, structured_items,
                                          structured_name)
from loadtest.workload.synthetic import synthetic_items, synthetic_name
from loadtest.workload.tokens import TokenText, find_tokenizer, load_token_text
from loadtest.workload.trace import Trace, load_trace, read_trace, trace_name

__all__ = ["Bodies", "LazySpecs", "build_workload", "check_source_files", "tokenizer_for",
           "workload_sha256"]


@dataclass(frozen=True)
class Bodies:
    """How one request item becomes an HTTP body for this run's engine and API."""

    api: str
    model: str
    ignore_eos: bool
    temperature: float
    ignore_eos_as: str = "ignore_eos"
    token_ids: bool = False
    regex_as: str = ""  # the engine's field for a regex constraint (Target.regex_as)

    @property
    def path(self) -> str:
        return dialect_for(self.api).PATHS[self.api]

    def body(self, item: Item) -> bytes:
        try:
            return dialect_for(self.api).build_body(
                self.api, self.model, item.prompt, item.max_tokens, ignore_eos=self.ignore_eos,
                temperature=self.temperature, ignore_eos_as=self.ignore_eos_as,
                token_ids=self.token_ids, extra=item.extra)
        except ValueError as exc:
            raise WorkloadError(str(exc)) from None

    def spec(self, request_id: int, item: Item) -> RequestSpec:
        return RequestSpec(request_id, item.prompt_id, self.path, self.body(item), item.prompt_tokens)


class LazySpecs(LazySequence[RequestSpec]):
    """RequestSpecs built when taken, from a lazy item sequence (a trace): O(1) memory per request."""

    def __init__(self, items: Sequence[Item], bodies: Bodies, asked: Callable[[int], int | None],
                 output_asked: Callable[[int], int]) -> None:
        self._items = items
        self._bodies = bodies
        self.asked = asked  # request i's prompt tokens, without building its body
        self.output_asked = output_asked  # and its output tokens

    def __len__(self) -> int:
        return len(self._items)

    def _at(self, index: int) -> RequestSpec:
        return self._bodies.spec(index, self._items[index])


def tokenizer_for(source: WorkloadOptions, model_dir: str, required: bool) -> TokenText | None:
    """The tokenizer token-exact sources build with; None where the source can go without."""
    try:
        return load_token_text(find_tokenizer(source.tokenizer, model_dir))
    except WorkloadError:
        if required or source.tokenizer:
            raise
        return None


def check_source_files(source: WorkloadOptions, requests: int) -> None:
    """What the run will refuse in a trace's files that no tokenizer decides (its times, its
    lengths, its calls' count), for a run whose prompts the engine's tokenizer builds, checked
    before the engine is asked (rig k8s, rig race): WorkloadError, one line."""
    if source.source == "trace" and source.trace is not None:
        read_trace(source.trace, requests)
    elif source.source == "agentic" and source.trace is not None:
        read_agentic(source.trace, requests)


def build_workload(prompts_name: str, requests: int, *, api: str, model: str, max_tokens: int,
                   ignore_eos: bool = False, temperature: float = 0.0,
                   ignore_eos_as: str = "ignore_eos", token_ids: bool = False,
                   source: WorkloadOptions | None = None, model_dir: str = "",
                   regex_as: str = "", lora_as: str = "model") -> Workload:
    """The run's workload: --prompts (source None or prompts) or the source's own requests,
    spread over LoRA adapters where asked. `requests` counts sessions for conversation
    workloads; `regex_as` is how the engine takes a regex constraint (Target.regex_as),
    `lora_as` how it takes a request's adapter (Target.lora_as).
    WorkloadError (one line) when the options, files or tokenizer do not make a workload."""
    source = source or WorkloadOptions()
    built = _source_workload(prompts_name, requests, api=api, model=model, max_tokens=max_tokens,
                             ignore_eos=ignore_eos, temperature=temperature,
                             ignore_eos_as=ignore_eos_as, token_ids=token_ids, source=source,
                             model_dir=model_dir, regex_as=regex_as)
    return with_adapters(built, source.lora, source.seed, lora_as)


def _source_workload(prompts_name: str, requests: int, *, api: str, model: str, max_tokens: int,
                     ignore_eos: bool, temperature: float, ignore_eos_as: str, token_ids: bool,
                     source: WorkloadOptions, model_dir: str, regex_as: str) -> Workload:
    if requests <= 0:
        raise WorkloadError(f"--requests must be a positive integer, got {requests}")
    if max_tokens <= 0:
        raise WorkloadError(f"--max-tokens must be a positive integer, got {max_tokens}")
    bodies = Bodies(api, model, ignore_eos, temperature, ignore_eos_as, token_ids, regex_as)
    tokens = None
    if source.source != "prompts":
        tokens = tokenizer_for(source, model_dir, required=source.needs_tokenizer)
    context = Context(source, requests, max_tokens, tokens)
    sampling = {"requests": requests, "max_tokens": max_tokens, "ignore_eos": ignore_eos,
                "temperature": temperature}
    if source.source == "prompts":
        name, sha = prompts_identity(prompts_name, requests, max_tokens, ignore_eos, temperature)
        return _requests_workload(name, sha, prompt_items(prompts_name, context), requests,
                                  bodies, "prompts", {})
    if source.source == "trace":
        assert source.trace is not None
        trace = load_trace(source.trace, context)
        return _trace_workload(context, bodies, sampling, trace, trace_name(trace, context), {})
    if source.source == "agentic":
        assert source.trace is not None
        trace, described = load_agentic(source.trace, context)
        stem = source.trace.stem if "agentic" in source.trace.stem else f"{source.trace.stem}-agentic"
        name = f"{stem}-x{source.speedup:g}-{len(trace)}"
        return _trace_workload(context, bodies, sampling, trace, name, described)
    if source.source == "structured":
        return _structured_workload(context, bodies, sampling)
    columns = _source_columns(source, tokens)
    if source.source == "dataset":
        conversations, fmt, file_sha = read_dataset(context)
        columns.update(dataset_format=fmt, dataset_sha256=file_sha, dataset_mode=source.dataset_mode)
        stem = source.dataset.stem if source.dataset else "dataset"
        if source.dataset_mode == "conversation":
            sessions = dataset_sessions(conversations, context)
            return _sessions_workload(f"{stem}-conv-{requests}", sessions, source, sampling,
                                      columns, file_sha)
        name = f"{stem}-{requests}x{context.output_label if source.output_len else max_tokens}"
        return _requests_workload(name, _digest(source, sampling, file_sha),
                                  dataset_items(conversations, context), requests, bodies,
                                  "dataset", columns)
    if source.source == "conversation":
        return _sessions_workload(conversation_name(context), conversation_sessions(context),
                                  source, sampling, columns, "")
    make, name = {"synthetic": (synthetic_items, synthetic_name),
                  "prefix": (prefix_items, prefix_name)}[source.source]
    return _requests_workload(name(context), _digest(source, sampling, ""), make(context),
                              requests, bodies, source.source, columns)


def workload_sha256(prompts_name: str, requests: int, *, max_tokens: int, ignore_eos: bool = False,
                    temperature: float = 0.0, source: WorkloadOptions | None = None) -> str:
    """The hash build_workload gives these options, without a tokenizer or an engine (a sweep
    names its cells before any engine runs): the source's files are hashed, not parsed."""
    source = source or WorkloadOptions()
    if source.source == "prompts":
        sha = prompts_identity(prompts_name, requests, max_tokens, ignore_eos, temperature)[1]
        return mixed_sha256(sha, source.lora, source.seed)
    sampling = {"requests": requests, "max_tokens": max_tokens, "ignore_eos": ignore_eos,
                "temperature": temperature}
    path = {"dataset": source.dataset, "trace": source.trace, "agentic": source.trace,
            "structured": _constraints_path(source)}.get(source.source)
    file_sha = (files_sha256(path) if source.source == "agentic" and path
                else _file_sha256(path) if path else "")
    sha = _digest(source, sampling, file_sha)
    return mixed_sha256(sha, source.lora, source.seed)


def _constraints_path(source: WorkloadOptions) -> Path | None:
    return resolve_constraints(source.constraints or "json") if source.source == "structured" else None


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read it ({exc.strerror})") from None
    return digest.hexdigest()


def _requests_workload(name: str, sha: str, items: list[Item], requests: int, bodies: Bodies,
                       source: str, columns: dict[str, Any]) -> Workload:
    """Request i is item i mod len(items): a prompt set or dataset cycles, others hold `requests`."""
    made = [bodies.body(item) for item in items]
    specs = [RequestSpec(i, items[i % len(items)].prompt_id, bodies.path, made[i % len(items)],
                         items[i % len(items)].prompt_tokens) for i in range(requests)]
    counted = [item for item in items if item.prompt_tokens is not None]
    longest = max(counted, key=lambda it: (it.prompt_tokens or 0) + it.max_tokens, default=None)
    if counted:
        asked = [spec.prompt_tokens or 0 for spec in specs]
        columns["prompt_tokens_asked_mean"] = round(sum(asked) / len(asked), 2)
    return Workload(name, specs, sha, source=source, columns=columns,
                    longest=(longest.prompt_id, longest.prompt_tokens or 0, longest.max_tokens)
                    if longest else None)


def _sessions_workload(name: str, sessions: list[SessionSpec], source: WorkloadOptions,
                       sampling: dict[str, Any], columns: dict[str, Any], file_sha: str) -> Workload:
    """A conversation workload. Its `longest` is the longest single turn, message and answer:
    a conversation that outgrows the context as it goes is ended there by the client
    (session_end context_full), not refused; one turn that cannot fit at all is refused."""
    turns = [(s.conversation_id, t) for s in sessions for t in s.turns]
    longest = None
    if all(turn.prompt_tokens is not None for _, turn in turns):
        conversation_id, top = max(turns, key=lambda pair: (pair[1].prompt_tokens or 0) + pair[1].max_tokens)
        longest = (conversation_id, top.prompt_tokens or 0, top.max_tokens)
    columns.update(turns=max(len(s.turns) for s in sessions), sessions=len(sessions))
    return Workload(name, [], _digest(source, sampling, file_sha), sessions=sessions,
                    source=source.source if source.source == "conversation" else "dataset",
                    columns=columns, longest=longest)


def _trace_workload(context: Context, bodies: Bodies, sampling: dict[str, Any], trace: Trace,
                    name: str, described: dict[str, Any]) -> Workload:
    """A schedule-carrying source (a Mooncake or agentic trace): requests at its times."""
    source = context.options
    totals = trace.inputs + trace.outputs
    at = int(totals.argmax())
    columns = {**_source_columns(source, context.tokens), "trace_sha256": trace.file_sha256,
               "speedup": source.speedup,
               "prompt_tokens_asked_mean": round(float(trace.inputs.mean()), 2),
               "trace_duration_s": round(float(trace.timestamps_ms[-1] - trace.timestamps_ms[0])
                                         / 1000 / source.speedup, 3), **described}
    return Workload(name,
                    LazySpecs(trace, bodies, lambda i: int(trace.inputs[i]),
                              lambda i: int(trace.outputs[i])),
                    _digest(source, sampling, trace.file_sha256),
                    schedule_ns=trace.schedule_ns(source.speedup), source=source.source,
                    columns=columns,
                    longest=(trace[at].prompt_id, int(trace.inputs[at]), int(trace.outputs[at])))


def _structured_workload(context: Context, bodies: Bodies, sampling: dict[str, Any]) -> Workload:
    """Constrained answers (loadtest/workload/structured.py), each checked after it arrives
    (answers.py); with --constrain off, the same prompts sent unconstrained and unchecked (a
    graded task's answer is checked all the same)."""
    from loadtest.workload.answers import AnswerChecks  # jsonschema: only for this source

    source = context.options
    path = _constraints_path(source)
    assert path is not None
    if bodies.api != "chat":
        raise WorkloadError("--workload structured sends chat requests (tools, response_format):"
                            " add --api chat")
    tasks, file_sha = load_tasks(path)
    items = structured_items(tasks, context, bodies.regex_as)
    if not source.constrain:
        items = [Item(item.prompt_id, item.prompt, item.max_tokens) for item in items]
    kinds = sorted({task.kind for task in tasks})
    columns = {**_source_columns(source, None), "constraints": source.constraints or "json",
               "constraints_sha256": file_sha, "constraint_kinds": "+".join(kinds),
               "constrained": source.constrain}
    name = structured_name(path, context) + ("" if source.constrain else "-unconstrained")
    workload = _requests_workload(name, _digest(source, sampling, file_sha), items,
                                  context.requests, bodies, "structured", columns)
    # graded tasks carry no constraint: their answers are graded with --constrain off too
    checked = tasks if source.constrain else [task for task in tasks if task.kind == "answer"]
    if checked:
        workload = dataclasses.replace(workload, answers=AnswerChecks(checked))
    return workload


def _source_columns(source: WorkloadOptions, tokens: TokenText | None) -> dict[str, Any]:
    """The row's columns that say what the source was asked for."""
    columns: dict[str, Any] = {"workload_seed": source.seed}
    if source.input_len is not None and source.source != "trace":
        columns["input_len"] = source.input_len.text
    if source.output_len is not None:
        columns["output_len"] = source.output_len.text
    if source.source == "prefix":
        columns.update(prefix_groups=source.prefix_groups, prefix_len=source.prefix_len)
    if source.source in ("conversation", "dataset") and source.think_time_s:
        columns["think_time_s"] = source.think_time_s
    if tokens is not None:
        columns.update(tokenizer=str(tokens.path), tokenizer_sha256=tokens.sha256)
    return columns


def _digest(source: WorkloadOptions, sampling: dict[str, Any], file_sha: str) -> str:
    """Engine-independent: what the source was asked, its file's content, counts and sampling."""
    described = {
        "source": source.source, "seed": source.seed, "file_sha256": file_sha, **sampling,
        "input_len": source.input_len.text if source.input_len else None,
        "output_len": source.output_len.text if source.output_len else None,
    }
    if source.source == "prefix":
        described.update(prefix_groups=source.prefix_groups, prefix_len=source.prefix_len)
    if source.source in ("conversation", "dataset"):
        described.update(turns=source.turns, think_time_s=source.think_time_s)
    if source.source == "dataset":
        described.update(dataset_mode=source.dataset_mode, columns=source.columns,
                         min_input_len=source.min_input_len, max_input_len=source.max_input_len)
    if source.source in ("trace", "agentic"):
        described["speedup"] = source.speedup
    if source.source == "structured":
        described["constrain"] = source.constrain  # the constraints: file_sha256
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()
