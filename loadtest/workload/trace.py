"""Trace replay: a Mooncake-format JSONL trace, one request per line:

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}

`timestamp` is the request's arrival in ms from the trace's start, `hash_ids` name its prompt's
512-token blocks: the same id is the same block content, so requests that share ids share a
prefix, as in the traced service. Timestamps / --speedup become Workload.schedule_ns, the
open-loop schedule the Dispatcher keeps (as --rate's), so latency counts from them.

A 100,000-line trace is held as numpy arrays; each request's text is joined on take from block
texts made from (seed, block id) and kept in a small cache: memory does not grow with the trace.
Traces: github.com/kvcache-ai/Mooncake (FAST25-release/traces/*.jsonl).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from loadtest.workload.items import Context, Item
from loadtest.workload.spec import LazySequence, WorkloadError
from loadtest.workload.tokens import TokenText

__all__ = ["BLOCK_TOKENS", "Trace", "load_trace", "read_trace", "trace_name"]

BLOCK_TOKENS = 512
MAX_TRACE_BYTES = 1 << 30
_BLOCK_STREAM, _TAIL_STREAM = 21, 22
_MAX_LENGTH = 1 << 20


class Trace(LazySequence[Item]):
    """The first `requests` requests of a trace, each Item built when taken (O(its blocks))."""

    def __init__(self, path: Path, timestamps_ms: np.ndarray, inputs: np.ndarray,
                 outputs: np.ndarray, block_ids: np.ndarray, block_starts: np.ndarray,
                 tokens: TokenText, seed: int, file_sha256: str,
                 block_tokens: int = BLOCK_TOKENS, labels: Sequence[str] | None = None) -> None:
        self.path = path
        self.block_tokens = block_tokens  # tokens per hash id (Mooncake's 512; others say theirs)
        self._labels = labels  # each request's prompt_id; "t<index>" without
        self.timestamps_ms = timestamps_ms
        self.inputs = inputs
        self.outputs = outputs
        self._block_ids = block_ids
        self._block_starts = block_starts  # request i's ids: block_ids[starts[i]:starts[i+1]]
        self._tokens = tokens
        self._seed = seed
        self.file_sha256 = file_sha256
        self._block = lru_cache(maxsize=4096)(self._make_block)

    def __len__(self) -> int:
        return len(self.inputs)

    def _at(self, index: int) -> Item:
        tokens = int(self.inputs[index])
        label = self._labels[index] if self._labels is not None else f"t{index}"
        return Item(label, self._text(index, tokens - self._tokens.special),
                    int(self.outputs[index]), tokens)

    def schedule_ns(self, speedup: float) -> list[int]:
        """Each request's send offset from the first, in ns, the trace's gaps divided by speedup."""
        offsets = (self.timestamps_ms - self.timestamps_ms[0]) * (1e6 / speedup)
        return np.rint(offsets).astype(np.int64).tolist()

    def _text(self, index: int, words: int) -> str:
        ids = self._block_ids[self._block_starts[index]:self._block_starts[index + 1]]
        parts: list[str] = []
        size = self.block_tokens
        for block_id in ids[: -(-words // size)]:
            text, ends = self._block(int(block_id))
            take = min(size, words)
            parts.append(text if take == size else text[: ends[take - 1]])
            words -= take
        if words > 0:  # fewer blocks than the length: the rest is this request's own text
            parts.append(self._tokens.words_text(
                np.random.default_rng([self._seed, _TAIL_STREAM, index]), words))
        return "".join(parts)

    def _make_block(self, block_id: int) -> tuple[str, np.ndarray]:
        rng = np.random.default_rng([self._seed, _BLOCK_STREAM, block_id])
        picked = rng.integers(0, len(self._tokens.words), self.block_tokens)
        return "".join(self._tokens.words[picked].tolist()), np.cumsum(self._tokens.word_lengths[picked])


def load_trace(path: Path, context: Context) -> Trace:
    """The trace's first `context.requests` requests; WorkloadError naming the line of a bad one."""
    tokens = context.need_tokens()
    rows = read_trace(path, context.requests, tokens.min_tokens())
    return Trace(path, *rows[:5], tokens, context.options.seed, rows[5])


def read_trace(path: Path, count: int, min_tokens: int = 1) -> tuple[Any, ...]:
    """The first `count` requests' (timestamps, inputs, outputs, hash ids, their starts) and the
    file's digest; WorkloadError naming the line of a bad one. The tokenizer decides only
    `min_tokens`, the shortest prompt it builds: with 1, every other check of the file, made
    before the engine names its tokenizer (loadtest/launch/checks.py)."""
    timestamps = np.empty(count, dtype=np.float64)
    inputs = np.empty(count, dtype=np.int64)
    outputs = np.empty(count, dtype=np.int64)
    ids: list[int] = []
    starts = [0]
    seen = 0
    digest = hashlib.sha256()
    for number, line in enumerate(_lines(path), start=1):
        digest.update(line)
        if seen == count or not line.strip():
            continue
        row = _parse(line, f"{path}:{number}", min_tokens)
        if seen and row[0] < timestamps[seen - 1]:
            raise WorkloadError(f"{path}:{number}: timestamp {row[0]:g} is before the line "
                                "above's; a trace is in arrival order")
        timestamps[seen], inputs[seen], outputs[seen] = row[0], row[1], row[2]
        ids.extend(row[3])
        starts.append(len(ids))
        seen += 1
    if seen < count:
        raise WorkloadError(f"{path}: {seen} requests in the trace, fewer than --requests {count}")
    return (timestamps, inputs, outputs, np.asarray(ids, dtype=np.int64),
            np.asarray(starts, dtype=np.int64), digest.hexdigest())


def trace_name(trace: Trace, context: Context) -> str:
    return f"{trace.path.stem}-x{context.options.speedup:g}-{len(trace)}"


def _lines(path: Path) -> Iterator[bytes]:
    """The trace's lines, read as they go (the whole file is hashed, only --requests parsed)."""
    try:
        if path.stat().st_size > MAX_TRACE_BYTES:
            raise WorkloadError(f"{path}: over {MAX_TRACE_BYTES >> 30} GiB; split the trace")
        with path.open("rb") as file:
            yield from file
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read the trace ({exc.strerror})") from None


def _parse(line: bytes, where: str, min_tokens: int) -> tuple[float, int, int, list[int]]:
    try:
        row = json.loads(line)
    except ValueError as exc:
        raise WorkloadError(f"{where}: not valid JSON ({getattr(exc, 'msg', exc)})") from None
    if not isinstance(row, dict):
        raise WorkloadError(f"{where}: each line is an object with timestamp, input_length, "
                            "output_length, hash_ids")
    stamp = row.get("timestamp")
    if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or not 0 <= stamp < 1e15:
        raise WorkloadError(f"{where}: \"timestamp\" must be a number of ms >= 0")
    lengths = [row.get("input_length"), row.get("output_length")]
    for name, value in zip(("input_length", "output_length"), lengths):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_LENGTH:
            raise WorkloadError(f"{where}: \"{name}\" must be a whole number from 1 to {_MAX_LENGTH}")
    if lengths[0] < min_tokens:
        raise WorkloadError(f"{where}: \"input_length\" {lengths[0]} is under the tokenizer's "
                            f"{min_tokens} tokens for the shortest prompt")
    hash_ids = row.get("hash_ids", [])
    if not isinstance(hash_ids, list) or not all(
            isinstance(h, int) and not isinstance(h, bool) and 0 <= h < 2**63 for h in hash_ids):
        raise WorkloadError(f"{where}: \"hash_ids\" must be a list of whole numbers >= 0")
    return float(stamp), lengths[0], lengths[1], hash_ids
