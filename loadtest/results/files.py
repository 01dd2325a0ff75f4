"""Files a run leaves, written so a crash never leaves half of anything.

    OUT/runs.csv                  one flat row per run (appended atomically, under a lock)
    OUT/runs/RUN_ID/run.json      metadata before the first request; metadata + summary at the end
    OUT/runs/RUN_ID/requests.jsonl one line per finished request, flushed as it finishes

A run whose process dies keeps its run.json (status "running") and every request line already
written, and adds no row to runs.csv.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import tempfile
from collections.abc import Sequence
from contextlib import contextmanager
from itertools import zip_longest
from pathlib import Path
from typing import Any, Iterator, TextIO

from loadtest.results.record import RequestRecord
from loadtest.results.schema import COLUMN_NAMES, SCHEMA_VERSION

__all__ = ["RecordWriter", "ResultsError", "SCHEMA_VERSION", "write_csv", "write_json",
           "append_run_row", "check_runs_file", "read_records", "read_runs"]


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace `path` atomically: a reader sees the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _replacing(path) as tmp:
        json.dump(data, tmp, indent=2, default=str)
        tmp.write("\n")


def write_csv(path: Path, columns: Sequence[str], rows: Sequence[dict[str, object]]) -> None:
    """Replace `path` atomically with a CSV of `rows` under `columns` (extra keys left out)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    with _replacing(path, newline="") as tmp:
        tmp.write(buffer.getvalue())


@contextmanager
def _replacing(path: Path, newline: str | None = None) -> Iterator[TextIO]:
    """A hidden temp file beside `path` that replaces it once written and synced; on any
    failure (a full disk) it is removed and `path` stays as it was."""
    tmp = tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.",
                                      delete=False, newline=newline, encoding="utf-8")
    try:
        with tmp:
            yield tmp
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp.name, path)
    except BaseException:
        Path(tmp.name).unlink(missing_ok=True)
        raise


class RecordWriter:
    """Appends one JSON line per request and flushes it, so a crash loses at most the line
    being written (the reader skips a torn last line)."""

    def __init__(self, path: Path, run_id: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._run_id = run_id
        self._file: TextIO = path.open("a", encoding="utf-8")

    def write(self, record: RequestRecord) -> None:
        row = {"run_id": self._run_id, **record.to_json()}
        self._file.write(json.dumps(row, separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_records(path: Path) -> list[RequestRecord]:
    records = []
    with path.open(encoding="utf-8") as file:
        for line in file:
            try:
                records.append(RequestRecord.from_json(json.loads(line)))
            except ValueError:
                continue  # a torn last line from a killed run
    return records


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class ResultsError(ValueError):
    """A results file this rig cannot add to; the message is one line for the user."""


def check_runs_file(path: Path) -> None:
    """Refuse, before a run, a CSV that is not a runs.csv of this rig (no run_id column), or one
    that a new row would corrupt or this rig cannot read (_checked_rows, which append_run_row
    applies again to the rows it rewrites)."""
    header, _ = _checked_rows(path)
    if header and "run_id" not in header:
        raise ResultsError(f"{path} has no run_id column: not a runs.csv of this rig; "
                           "move it aside or pass another --out")


def _checked_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """runs.csv's header and rows, or ResultsError: not UTF-8, a row with more cells than the
    header (edited by hand), or rows written by a newer rig (schema_version above this one's).
    Older rows are fine: a new column is added at the end and they get it empty."""
    if not path.exists():
        return [], []
    try:
        with path.open(newline="", encoding="utf-8") as file:
            reader = csv.reader(file)
            header = next(reader, None)
            if header is None:
                return [], []
            version = header.index("schema_version") if "schema_version" in header else None
            rows = []
            for cells in reader:
                if len(cells) > len(header):
                    raise ResultsError(f"{path} line {reader.line_num} has {len(cells)} cells "
                                       f"for {len(header)} columns (edited by hand?); fix it "
                                       "or pass another --out")
                if version is not None and len(cells) > version and _newer(cells[version]):
                    raise ResultsError(f"{path} line {reader.line_num} was written by a newer "
                                       f"rig (schema_version {cells[version]}, this rig writes "
                                       f"{SCHEMA_VERSION}); pass another --out")
                rows.append(dict(zip_longest(header, cells, fillvalue="")))  # short: empty cells
            return header, rows
    except UnicodeDecodeError:
        raise ResultsError(f"{path} is not UTF-8 text; fix it or pass another --out") from None
    except csv.Error as exc:
        raise ResultsError(f"{path} is not a readable CSV ({exc}); fix it or pass another "
                           "--out") from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read it ({exc.strerror})") from None


def _newer(version: str) -> bool:
    try:
        return int(version) > SCHEMA_VERSION
    except ValueError:
        return False


def read_runs(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as file:
        return list(csv.DictReader(file))


def append_run_row(path: Path, row: dict[str, Any]) -> None:
    """Add one row to runs.csv: the whole file is rewritten to a temp file and renamed, so a crash
    leaves the old file intact. Columns are in the schema's order (loadtest/results/schema.py);
    a column it lacks (an older rig's) goes at the end. Old rows get new columns empty.
    ResultsError, and the file untouched, when it is one _checked_rows refuses (it may have
    been edited during the run)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    row = {"schema_version": SCHEMA_VERSION, **row}
    with _locked(path):
        _, rows = _checked_rows(path)
        columns = [c for c in COLUMN_NAMES if c in row or any(c in r for r in rows)]
        for source in (*rows, row):
            columns += [c for c in source if c not in columns]
        with _replacing(path, newline="") as tmp:
            writer = csv.DictWriter(tmp, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
            writer.writerow({k: _cell(v) for k, v in row.items()})


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.1f}"
    if isinstance(value, (list, tuple)):
        return ";".join(map(str, value))
    return "" if value is None else value
