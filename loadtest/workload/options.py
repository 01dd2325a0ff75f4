"""The workload options (added to Locust's, so workers, sweeps and the web UI get them) and
their validation: the one place that turns option text into a checked WorkloadOptions.

    --workload prompts       the --prompts set (default), --max-tokens each
    --workload synthetic     --input-len DIST tokens of random words, --output-len DIST
    --workload dataset       --dataset FILE (ShareGPT JSON, OpenAI chat JSONL, prompt JSONL,
                             CSV/Parquet with --columns), first turns or whole conversations
    --workload prefix        --prefix-groups G shared --prefix-len P prefixes + --input-len suffixes
    --workload trace         --trace FILE (Mooncake JSONL), replayed at its timestamps / --speedup
    --workload conversation  --turns T synthetic sessions (--input-len user messages, --think-time)
    --workload agentic       --trace FILE|DIR (agent sessions, Weka trace JSON: agentic.py), on
                             its own schedule / --speedup
    --workload structured    --constraints json|regex|tools|tools-graded|graded|FILE:
                             constrained answers, each checked, or graded ones (--constrain
                             off: the same prompts unconstrained)

DIST is loadtest/workload/lengths.py's grammar. Bad values raise WorkloadError (one line).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from loadtest.workload.chosen import SCHEDULED, WorkloadOptions
from loadtest.workload.lengths import parse_lengths
from loadtest.workload.lora import LORA_FLAGS, add_lora_options, lora_mix
from loadtest.workload.spec import WorkloadError

__all__ = ["DATASET_FORMATS", "DATASET_MODES", "OPTION_FLAGS", "SOURCES", "add_workload_options",
           "workload_options"]

SOURCES = ("prompts", "synthetic", "dataset", "prefix", "trace", "conversation", "agentic",
           "structured")
DATASET_FORMATS = ("sharegpt", "openai", "prompts", "csv", "parquet")
DATASET_MODES = ("first-turn", "conversation")
MAX_GROUPS = 100_000
MAX_TURNS = 1_000
MAX_SEED = 2**63 - 1

# Each option's attribute on Locust's parsed options and its command-line flag; a sweep's
# workload mapping names them by attribute (input_len: 128).
OPTION_FLAGS = {
    "workload": "--workload", "input_len": "--input-len", "output_len": "--output-len",
    "dataset": "--dataset", "dataset_format": "--dataset-format", "columns": "--columns",
    "dataset_mode": "--dataset-mode", "min_input_len": "--min-input-len",
    "max_input_len": "--max-input-len", "prefix_groups": "--prefix-groups",
    "prefix_len": "--prefix-len", "turns": "--turns", "think_time": "--think-time",
    "trace": "--trace", "speedup": "--speedup", "seed": "--seed", "tokenizer": "--tokenizer",
    **LORA_FLAGS,
    "constraints": "--constraints", "constrain": "--constrain",
}


def add_workload_options(parser: Any) -> None:
    group = parser.add_argument_group("llm-load-rig workload (loadtest/workload/)")
    add = group.add_argument
    add("--workload", default="prompts", help=f"workload source: {', '.join(SOURCES)} (default prompts)")
    add("--input-len", default="", help="prompt tokens (synthetic; prefix: the unique suffix; "
        "conversation: each user message): N, LO-HI, normal:MEAN,SD[,LO-HI] or hist:FILE")
    add("--output-len", default="", help="output tokens per request, same grammar (default --max-tokens)")
    add("--dataset", default="", help="dataset file (--workload dataset)")
    add("--dataset-format", default="", help=f"{', '.join(DATASET_FORMATS)} (default: from the file)")
    add("--columns", default="", help="CSV/Parquet columns: prompt=COL[,output=COL]")
    add("--dataset-mode", default="first-turn", help=f"{' or '.join(DATASET_MODES)} (whole "
        "conversations as sessions; --requests counts them)")
    add("--min-input-len", default="", help="dataset: skip prompts under N tokens")
    add("--max-input-len", default="", help="dataset: skip prompts over N tokens")
    add("--prefix-groups", default="8", help="prefix: G groups, request i in group i mod G")
    add("--prefix-len", default="1024", help="prefix: tokens shared by each group's requests")
    add("--turns", default="4", help="conversation: turns per session")
    add("--think-time", default="0", help="conversation: seconds between an answer and the next turn")
    add("--trace", default="", help="trace: a Mooncake JSONL file (timestamp ms, input_length, "
        "output_length, hash_ids); agentic: a Weka agent trace JSON file or a folder of them")
    add("--speedup", default="1", help="trace: divide its timestamps by X (2 = twice as fast)")
    add("--seed", default="0", help="seed for every random choice of the workload")
    add("--tokenizer", default="", help="tokenizer.json (or its folder) for token-exact prompts "
        "(default: the served model's folder)")
    add_lora_options(group)
    add("--constraints", default="", help="structured: json, regex, tools, graded (the shipped tasks) or "
        "a JSONL file of tasks (docs/workloads.md); default json")
    add("--constrain", default="on", help="structured: on (default), or off to send the same "
        "prompts unconstrained, the baseline of the constraints' cost")


def workload_options(options: Any) -> WorkloadOptions:
    """The parsed options' WorkloadOptions (missing attributes take their defaults)."""
    get = lambda name, default="": str(getattr(options, name, default) or default).strip()  # noqa: E731
    source = get("workload", "prompts")
    if source not in SOURCES:
        raise WorkloadError(f"--workload {source!r}: choose one of {', '.join(SOURCES)}")
    input_text = get("input_len") or ("256" if source in ("synthetic", "conversation") else
                                      "64" if source == "prefix" else "")
    chosen = WorkloadOptions(
        source=source,
        input_len=parse_lengths(input_text, "--input-len") if input_text else None,
        output_len=parse_lengths(get("output_len"), "--output-len") if get("output_len") else None,
        dataset=Path(get("dataset")) if get("dataset") else None,
        dataset_format=_choice(get("dataset_format"), DATASET_FORMATS, "--dataset-format"),
        columns=_columns(get("columns")),
        dataset_mode=_choice(get("dataset_mode", "first-turn"), DATASET_MODES, "--dataset-mode"),
        min_input_len=_whole("--min-input-len", get("min_input_len", "0"), 0),
        max_input_len=_whole("--max-input-len", get("max_input_len", "0"), 0),
        prefix_groups=_whole("--prefix-groups", get("prefix_groups", "8"), 1, MAX_GROUPS),
        prefix_len=_whole("--prefix-len", get("prefix_len", "1024"), 1, 1 << 20),
        turns=_whole("--turns", get("turns", "4"), 1, MAX_TURNS),
        think_time_s=_seconds("--think-time", get("think_time", "0")),
        trace=Path(get("trace")) if get("trace") else None,
        speedup=_speedup(get("speedup", "1")),
        seed=_whole("--seed", get("seed", "0"), 0, MAX_SEED),
        tokenizer=get("tokenizer"),
        lora=lora_mix(get("lora_adapters"), get("lora_mix")),
        constraints=get("constraints"),
        constrain=_choice(get("constrain", "on"), ("on", "off"), "--constrain") == "on",
    )
    _check_source(chosen)
    if source in SCHEDULED and get("rate"):
        raise WorkloadError(f"--rate and --workload {source} both set the schedule: the trace's "
                            "timestamps are it (scale them with --speedup); drop --rate")
    return chosen


def _check_source(o: WorkloadOptions) -> None:
    """Each source's own file, and no file given to a source that would ignore it."""
    if o.source == "dataset" and o.dataset is None:
        raise WorkloadError("--workload dataset needs --dataset FILE")
    if o.source in SCHEDULED and o.trace is None:
        raise WorkloadError(f"--workload {o.source} needs --trace FILE")
    if o.dataset is not None and o.source != "dataset":
        raise WorkloadError(f"--dataset is for --workload dataset, not {o.source}")
    if o.trace is not None and o.source not in SCHEDULED:
        raise WorkloadError(f"--trace is for --workload trace or agentic, not {o.source}")
    if (o.constraints or not o.constrain) and o.source != "structured":
        raise WorkloadError(f"--constraints and --constrain are for --workload structured, not "
                            f"{o.source}")
    if o.source == "structured":  # the tasks checked now, before an engine is asked anything
        from loadtest.workload.structured import load_tasks, resolve_constraints
        load_tasks(resolve_constraints(o.constraints or "json"))
    if o.max_input_len and o.min_input_len > o.max_input_len:
        raise WorkloadError(f"--min-input-len {o.min_input_len} is over --max-input-len {o.max_input_len}")
    if o.columns and o.dataset_format not in ("", "csv", "parquet"):
        raise WorkloadError("--columns is for CSV and Parquet datasets")


def _choice(value: str, choices: tuple[str, ...], option: str) -> str:
    if value and value not in choices:
        raise WorkloadError(f"{option} {value!r}: choose one of {', '.join(choices)}")
    return value


def _columns(text: str) -> dict[str, str]:
    """`prompt=COL[,output=COL]`."""
    if not text:
        return {}
    mapping: dict[str, str] = {}
    for part in text.split(","):
        key, sep, column = part.partition("=")
        key, column = key.strip(), column.strip()
        if not sep or key not in ("prompt", "output") or not column or key in mapping:
            raise WorkloadError(f"--columns {text!r}: give prompt=COLUMN[,output=COLUMN]")
        mapping[key] = column
    if "prompt" not in mapping:
        raise WorkloadError(f"--columns {text!r}: name the prompt column (prompt=COLUMN)")
    return mapping


def _whole(option: str, text: str, minimum: int, maximum: int = MAX_SEED) -> int:
    if not text.isdecimal() or not minimum <= int(text) <= maximum:
        raise WorkloadError(f"{option} must be a whole number from {minimum} to {maximum}, got {text!r}")
    return int(text)


def _number(option: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise WorkloadError(f"{option} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise WorkloadError(f"{option} must be a finite number, got {text!r}")
    return value


def _seconds(option: str, text: str) -> float:
    value = _number(option, text)
    if not 0 <= value <= 3600:
        raise WorkloadError(f"{option} must be 0 to 3600 seconds, got {text!r}")
    return value


def _speedup(text: str) -> float:
    value = _number("--speedup", text)
    if not 0 < value <= 1e6:
        raise WorkloadError(f"--speedup must be a positive number (at most 1e6), got {text!r}")
    return value
