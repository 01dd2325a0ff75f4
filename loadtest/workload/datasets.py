"""Datasets of real prompts and conversations, in the formats people publish them:

- sharegpt: a JSON list of {"conversations": [{"from": "human"|"gpt"|"system", "value": ...}]}
  (ShareGPT_V3_unfiltered_cleaned_split.json, huggingface.co/datasets/anon8231489123/
  ShareGPT_Vicuna_unfiltered; the file vLLM's benchmarks read). A JSONL of such objects too.
- openai: JSONL, one {"messages": [{"role": "system"|"user"|"assistant", "content": ...}]} per
  line (OpenAI fine-tuning / batch chat files, most chat datasets exported to JSONL).
- prompts: the rig's prompt JSONL ({"prompt": ...} per line).
- csv / parquet: one prompt per row, its column named by --columns prompt=COL[,output=COL]
  (an output column holds each row's output length in tokens).

--dataset-mode first-turn sends each conversation's first user message as one request;
conversation sends whole conversations as sessions (their user turns, the engine's own
answers in between; loadtest/client/conversation.py). The dataset is shuffled with --seed and
cycled to --requests; --min/--max-input-len drop prompts by their token count.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.workload.items import Context, Item
from loadtest.workload.prompts import json_lines, parse_prompt
from loadtest.workload.spec import SessionSpec, TurnSpec, WorkloadError

__all__ = ["Conversation", "dataset_items", "dataset_sessions", "infer_format", "read_dataset"]

MAX_DATASET_BYTES = 4 << 30
_SHUFFLE, _OUTPUTS = 31, 32
_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
          "chatgpt": "assistant", "bard": "assistant", "bing": "assistant", "system": "system"}


@dataclass(frozen=True)
class Conversation:
    id: str
    system: str
    users: tuple[str, ...]  # the user turns, in order
    output_tokens: int | None = None  # an output-length column (CSV/Parquet)


def infer_format(path: Path, given: str) -> str:
    """--dataset-format, else the file's suffix, else its first line's keys."""
    if given:
        return given
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix == ".json":
        return "sharegpt"
    first = _first_line(path)
    keys = set(first) if isinstance(first, dict) else set()
    for key, name in (("conversations", "sharegpt"), ("messages", "openai"), ("prompt", "prompts")):
        if key in keys:
            return name
    raise WorkloadError(f"{path}: cannot tell its format from its name or first line; pass "
                        "--dataset-format sharegpt|openai|prompts|csv|parquet")


def read_dataset(context: Context) -> tuple[list[Conversation], str, str]:
    """(conversations, format, file sha256)."""
    o = context.options
    assert o.dataset is not None
    path = o.dataset
    fmt = infer_format(path, o.dataset_format)
    data = _read(path)
    if fmt in ("csv", "parquet"):
        rows = _table_rows(path, fmt, o.columns)
    else:
        rows = _json_rows(data, path, fmt)
    if not rows:
        raise WorkloadError(f"{path}: no prompts in the dataset")
    return rows, fmt, hashlib.sha256(data).hexdigest()


def dataset_items(conversations: list[Conversation], context: Context) -> list[Item]:
    """First-turn mode: each conversation's first user message, shuffled, filtered by length."""
    tokens = context.tokens
    counts = _counts([c.users[0] for c in conversations], context)
    kept = [(c, n) for c, n in zip(conversations, counts) if _fits(n, context)]
    if not kept:
        raise WorkloadError(f"{context.options.dataset}: no prompt within --min-input-len/"
                            "--max-input-len")
    order = context.rng(_SHUFFLE).permutation(len(kept))
    outputs = context.output_lengths(context.rng(_OUTPUTS), len(kept))
    items = []
    for position, index in enumerate(order):
        conversation, count = kept[index]
        out = int(outputs[position]) if context.options.output_len else (
            conversation.output_tokens or context.max_tokens)
        items.append(Item(conversation.id, conversation.users[0], out,
                          count if tokens is not None else None))
    return items


def dataset_sessions(conversations: list[Conversation], context: Context) -> list[SessionSpec]:
    """Conversation mode: --requests sessions cycling over the shuffled conversations."""
    counts = _counts([c.users[0] for c in conversations], context)
    kept = [c for c, n in zip(conversations, counts) if _fits(n, context)]
    if not kept:
        raise WorkloadError(f"{context.options.dataset}: no conversation within --min-input-len/"
                            "--max-input-len")
    order = context.rng(_SHUFFLE).permutation(len(kept))
    rng = context.rng(_OUTPUTS)
    sessions = []
    for session_id in range(context.requests):
        conversation = kept[order[session_id % len(kept)]]
        outputs = context.output_lengths(rng, len(conversation.users))
        think = context.options.think_time_s
        turns = tuple(TurnSpec(user, int(out), think if n else 0.0)
                      for n, (user, out) in enumerate(zip(conversation.users, outputs)))
        sessions.append(SessionSpec(session_id, conversation.id, turns, conversation.system))
    return sessions


def _counts(texts: list[str], context: Context) -> list[int | None]:
    if context.tokens is None:
        return [None] * len(texts)
    encoded = context.tokens.tokenizer.encode_batch(texts, add_special_tokens=True)
    return [len(e.ids) for e in encoded]


def _fits(count: int | None, context: Context) -> bool:
    o = context.options
    if count is None:
        return True
    return count >= o.min_input_len and (not o.max_input_len or count <= o.max_input_len)


def _read(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_DATASET_BYTES:
            raise WorkloadError(f"{path}: {size >> 20} MiB; a dataset may hold at most "
                                f"{MAX_DATASET_BYTES >> 30} GiB")
        return path.read_bytes()
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read the dataset ({exc.strerror})") from None


def _first_line(path: Path) -> Any:
    try:
        with path.open("rb") as file:
            for line in file:
                if line.strip():
                    return json.loads(line)
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read the dataset ({exc.strerror})") from None
    except ValueError:
        return None
    return None


def _json_rows(data: bytes, path: Path, fmt: str) -> list[Conversation]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if fmt == "sharegpt" and text.lstrip().startswith("["):
        try:
            entries = json.loads(text)
        except ValueError as exc:
            raise WorkloadError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None  # type: ignore[attr-defined]
        return [c for i, e in enumerate(entries) if (c := _sharegpt(e, f"{path}: entry {i + 1}", i))]
    rows = []
    for number, line in json_lines(text):
        where = f"{path}:{number}"
        if fmt == "prompts":
            prompt = parse_prompt(line, where, len(rows))
            rows.append(Conversation(prompt.id, "", (prompt.text,), prompt.max_tokens))
            continue
        try:
            entry = json.loads(line)
        except ValueError as exc:
            raise WorkloadError(f"{where}: not valid JSON ({exc})") from None
        found = _sharegpt(entry, where, len(rows)) if fmt == "sharegpt" else _openai(entry, where, len(rows))
        if found:
            rows.append(found)
    return rows


def _sharegpt(entry: Any, where: str, index: int) -> Conversation | None:
    """A conversation; None for one with no human turn (ShareGPT holds some: skipped)."""
    turns = entry.get("conversations") if isinstance(entry, dict) else None
    if not isinstance(turns, list):
        raise WorkloadError(f"{where}: a ShareGPT entry is an object with a \"conversations\" list")
    messages = []
    for turn in turns:
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str) \
                or turn.get("from") not in _ROLES:
            raise WorkloadError(f"{where}: each turn is {{\"from\": \"human\"|\"gpt\"|\"system\", "
                                "\"value\": TEXT}")
        messages.append((_ROLES[turn["from"]], turn["value"]))
    return _conversation(str(entry.get("id", index)), messages)


def _openai(entry: Any, where: str, index: int) -> Conversation | None:
    messages = entry.get("messages") if isinstance(entry, dict) else None
    if not isinstance(messages, list):
        raise WorkloadError(f"{where}: each line is an object with a \"messages\" list")
    pairs = []
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("content"), str) \
                or message.get("role") not in ("system", "user", "assistant"):
            raise WorkloadError(f"{where}: each message is {{\"role\": \"system\"|\"user\"|"
                                "\"assistant\", \"content\": TEXT}")
        pairs.append((message["role"], message["content"]))
    return _conversation(str(entry.get("id", index)), pairs)


def _conversation(conversation_id: str, messages: list[tuple[str, str]]) -> Conversation | None:
    system = "\n".join(text for role, text in messages if role == "system")
    users = tuple(text for role, text in messages if role == "user" and text.strip())
    return Conversation(conversation_id, system, users) if users else None


def _table_rows(path: Path, fmt: str, columns: dict[str, str]) -> list[Conversation]:
    import pandas as pd  # only CSV/Parquet datasets pay for the import

    if "prompt" not in columns:
        raise WorkloadError(f"{path}: a {fmt} dataset needs --columns prompt=COLUMN[,output=COLUMN]")
    try:
        if fmt == "csv":
            frame = pd.read_csv(path, sep="\t" if path.suffix.lower() == ".tsv" else ",",
                                usecols=lambda name: name in columns.values(), dtype=str,
                                keep_default_na=False)
        else:
            frame = pd.read_parquet(path, columns=[c for c in columns.values()])
    except ImportError:
        raise WorkloadError("Parquet datasets need pyarrow: pip install pyarrow") from None
    except (ValueError, KeyError, OSError, pd.errors.ParserError) as exc:
        raise WorkloadError(f"{path}: not a {fmt} table with the columns "
                            f"{', '.join(columns.values())} ({str(exc).splitlines()[0]})") from None
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors share no base class with pandas'
        raise WorkloadError(f"{path}: not a readable {fmt} file ({type(exc).__name__})") from None
    missing = [c for c in columns.values() if c not in frame.columns]
    if missing:
        raise WorkloadError(f"{path}: no column {missing[0]!r}; it has: "
                            f"{', '.join(map(str, frame.columns))}")
    names = list(columns.values())
    return [_table_row(dict(zip(names, values)), columns, f"{path}: row {n + 1}", n)
            for n, values in enumerate(zip(*(frame[name].tolist() for name in names)))]


def _table_row(values: dict[str, Any], columns: dict[str, str], where: str,
               index: int) -> Conversation:
    prompt = values.get(columns["prompt"])
    if not isinstance(prompt, str) or not prompt.strip():
        raise WorkloadError(f"{where}: the prompt column {columns['prompt']!r} is empty or not text")
    output = None
    if "output" in columns:
        raw = values.get(columns["output"])
        try:
            output = int(str(raw))
        except ValueError:
            output = -1
        if output < 1:
            raise WorkloadError(f"{where}: the output column {columns['output']!r} must hold a "
                                f"whole number of tokens >= 1, got {raw!r}")
    return Conversation(str(index), "", (prompt,), output)
