"""A run the rig made, read back for reconciling: its per-request records and run.json, and
the timestamps every peer definition is recomputed from.

What the records hold (loadtest/results/record.py): the send (`sent_ns`), the first
output-carrying chunk (`first_chunk_ns`), every gap between output chunks after it
(`chunk_gaps_ns`), the stream's end (`done_ns`, the last byte read), the output tokens as the
server reported them (`output_tokens`, `output_tokens_source`) and the output chunks counted.
What they do not hold, so no definition can be recomputed past it: the first byte's arrival,
chat's role announcement, a finish-only chunk, and the answer's text (unless --keep-outputs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtest.results.files import read_records
from loadtest.results.record import RequestRecord

__all__ = ["ReconcileError", "Run", "last_output_ns", "read_run"]


class ReconcileError(ValueError):
    """Input reconcile cannot use; the message is one line for the user."""


@dataclass
class Run:
    records: list[RequestRecord]
    meta: dict[str, Any] = field(default_factory=dict)  # run.json (empty when absent)
    path: Path | None = None

    @property
    def done(self) -> list[RequestRecord]:
        """Completed requests with a first chunk and an end: those every definition counts."""
        return [r for r in self.records
                if r.ok and r.first_chunk_ns is not None and r.done_ns is not None]

    @property
    def start_ns(self) -> int:
        """The first send (before any 429 wait), as summary.py counts completion_time_s."""
        return min(r.sent_ns - r.rate_limited_wait_ns for r in self.records)

    @property
    def end_ns(self) -> int:
        """The last answer's end, failed requests included."""
        return max(r.done_ns or r.sent_ns for r in self.records)

    @property
    def chat(self) -> bool:
        return self.meta.get("api") == "chat"


def last_output_ns(record: RequestRecord) -> int:
    """When the last output-carrying chunk arrived (the first chunk plus every gap after it)."""
    assert record.first_chunk_ns is not None
    return record.first_chunk_ns + sum(record.chunk_gaps_ns)


def read_run(folder: Path) -> Run:
    """The run in `folder` (a runs/RUN_ID folder), or ReconcileError naming what is missing."""
    if not folder.is_dir():
        raise ReconcileError(f"{folder} is not a folder (pass a run folder: results/runs/RUN_ID)")
    path = folder / "requests.jsonl"
    if not path.is_file():
        raise ReconcileError(f"{folder} has no per-request records (requests.jsonl); pass a run "
                             "folder the rig wrote: results/runs/RUN_ID")
    try:
        records = read_records(path)
    except (TypeError, UnicodeDecodeError) as exc:  # lines that are not the rig's records
        raise ReconcileError(f"{path} is not a requests.jsonl the rig wrote ({exc})") from None
    if not records:
        raise ReconcileError(f"{path} holds no request record")
    meta: dict[str, Any] = {}
    if (folder / "run.json").is_file():
        try:
            meta = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ReconcileError(f"{folder / 'run.json'} is not JSON: {exc}") from None
    run = Run(records=records, meta=meta if isinstance(meta, dict) else {}, path=folder)
    if not run.done:
        raise ReconcileError(f"{path}: no request completed, nothing to reconcile")
    return run
