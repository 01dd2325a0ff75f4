"""Results folders as typed tables: runs, requests and run_files (pandas DataFrames).

    runs       one row per run: every runs.csv column, typed by loadtest/results/schema.py, plus
               where the row came from (EXTRA_RUN_COLUMNS)
    requests   one row per requests.jsonl line, keyed by run_id, typed by RequestRecord's fields
    run_files  (run_id, name, content): the run's other files the report reads (RUN_FILES)

A column's type is its schema type: int -> Int64, float -> float64, bool -> boolean, str ->
string; an empty number is NULL, an empty text "" (NULL where its runs.csv had no such column);
`timestamp` and `sent_at` are UTC timestamps. A column no schema
names (an older or newer rig's) is a number where every cell is one, text otherwise. A cell that
is not what its column holds (text in a count, a timestamp that is none) is refused with
ExportError, in one line naming the file, line and column: nothing is silently dropped. Every
text cell passes through redact() again: secrets stay out even of rows an older rig wrote.
"""

from __future__ import annotations

import csv
import json
import math
import os
import socket
from dataclasses import fields
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd

from loadtest.report.runset import load_runs, run_files
from loadtest.results.record import RequestRecord
from loadtest.results.redact import redact
from loadtest.results.schema import BY_NAME

__all__ = ["EXTRA_RUN_COLUMNS", "ExportError", "OPTIONAL_REQUEST_KEYS", "RUN_FILES",
           "REQUEST_TYPES", "Tables", "read_results", "ns_to_unix", "unix_to_ns"]

# Columns the export adds to each run's row: where it came from.
EXTRA_RUN_COLUMNS = {
    "results_folder": "the results folder given to rig export (absolute path)",
    "runs_csv": "the runs.csv listing the run, relative to results_folder",
    "results_host": "the machine rig export read the folder on (its hostname)",
    "requests_found": "whether the run's requests.jsonl was found (its requests are in requests)",
}
# A run's files, besides requests.jsonl, that the report reads (kept as text, byte for byte).
RUN_FILES = ("run.json", "telemetry.jsonl", "telemetry_summary.json", "outputs.jsonl")
# requests.jsonl keys a line leaves out when they do not apply (RequestRecord.to_json)
OPTIONAL_REQUEST_KEYS = frozenset({"engine_flaws", "scheduled_ns", "cap_wait_ns", "ttft_sched_ms",
                                   "e2e_sched_ms", "session_id", "turn", "session_end",
                                   "turns_not_sent", "first_reasoning_ns", "last_reasoning_ns",
                                   "first_answer_ns", "reasoning_chunks", "reasoning_tokens",
                                   "answer_check"})


def _request_types() -> dict[str, str]:
    """requests.jsonl key -> its table type, from RequestRecord's field annotations."""
    types = {"run_id": "string"}
    for field in fields(RequestRecord):
        annotation = str(field.type)
        if field.name in ("output_ids", "output_text", "tool_calls"):
            continue  # never in requests.jsonl
        if field.name == "sent_at":
            types[field.name] = "timestamp"
        elif annotation.startswith("list[int]"):
            types[field.name] = "list<int64>"
        elif annotation.startswith("list[str]"):
            types[field.name] = "list<string>"
        elif annotation.startswith("int"):
            types[field.name] = "Int64"
        elif annotation.startswith("float"):
            types[field.name] = "float64"
        else:
            types[field.name] = "string"
    for derived in ("ttft_ms", "e2e_ms", "ttft_sched_ms", "e2e_sched_ms"):
        types[derived] = "float64"
    return types


REQUEST_TYPES: dict[str, str] = _request_types()


class ExportError(ValueError):
    """A results folder that cannot be exported; the message is one line for the user."""


class Tables:
    """The three tables of one or more results folders."""

    def __init__(self, runs: pd.DataFrame, requests: pd.DataFrame,
                 run_files: pd.DataFrame) -> None:
        self.runs, self.requests, self.run_files = runs, requests, run_files


def read_results(folders: list[Path]) -> tuple[Tables, list[str]]:
    """The tables of every run under `folders`, and notes for the user (a run listed in two
    folders is kept once, from the first). ExportError for a folder that is missing, holds no
    runs.csv, or holds one the rig cannot read."""
    runs_frames, seen, notes = [], {}, []
    for folder in folders:
        runs = _folder_runs(folder)
        twice = runs["run_id"].isin(seen)
        for run_id in runs.loc[twice, "run_id"]:
            notes.append(f"run {run_id} is in {seen[run_id]} and {folder}: kept from the first")
        runs = runs[~twice]
        seen.update(dict.fromkeys(runs["run_id"], str(folder)))
        runs_frames.append(runs)
    runs = pd.concat(runs_frames, ignore_index=True)
    requests, files, found = [], [], []
    for _, run in runs.iterrows():
        folder = run_files(run)
        found.append(folder is not None)
        if folder is not None:
            requests.append(_requests(folder / "requests.jsonl", str(run["run_id"])))
        folder = folder or _run_folder(run)
        if folder is None:
            continue
        files += [{"run_id": run["run_id"], "name": name,
                   "content": _text(folder / name)} for name in RUN_FILES
                  if (folder / name).is_file()]
    runs["requests_found"] = pd.array(found, dtype="boolean")
    runs = _typed_runs(runs)
    requests_table = (pd.concat([r for r in requests if not r.empty], ignore_index=True)
                      if any(not r.empty for r in requests) else pd.DataFrame())
    return Tables(runs, _typed_requests(requests_table),
                  pd.DataFrame(files, columns=["run_id", "name", "content"]).astype("string")), notes


def _run_folder(run: pd.Series) -> Path | None:
    """The run's folder where it kept no requests.jsonl (its telemetry summary alone, say): as
    the report looks for it, beside the runs.csv listing it, then at its run_dir."""
    candidates = [Path(run["_csv_dir"]) / "runs" / str(run["run_id"])]
    if isinstance(run.get("run_dir"), str) and run["run_dir"]:
        candidates.append(Path(run["run_dir"]))
    return next((folder for folder in candidates if folder.is_dir()), None)


def _folder_runs(folder: Path) -> pd.DataFrame:
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise ExportError(f"{folder} {what} (pass the --out folder of a run or sweep)")
    try:
        runs = load_runs(folder)
    except ValueError as exc:
        raise ExportError(str(exc)) from None
    if runs.empty:
        raise ExportError(f"{folder} holds no runs.csv rows (pass the --out folder of a run or "
                          "sweep; a complete, non-warm-up run adds one)")
    runs = runs.drop(columns=["model_key"])
    runs["results_folder"] = str(folder.absolute())
    runs["runs_csv"] = [os.path.relpath(Path(d) / "runs.csv", folder) for d in runs["_csv_dir"]]
    runs["results_host"] = socket.gethostname()
    return runs


def _text(path: Path) -> str:
    try:
        return redact(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ExportError(f"{path} is not UTF-8 text") from None
    except OSError as exc:
        raise ExportError(f"{path}: cannot read it ({exc.strerror})") from None


def _requests(path: Path, run_id: str) -> pd.DataFrame:
    """The lines of one requests.jsonl (a torn last line skipped, as the report skips it)."""
    rows = []
    try:
        with path.open(encoding="utf-8") as file:
            for number, line in enumerate(file, start=1):
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a torn last line from a killed run
                if not isinstance(row, dict):
                    raise ExportError(f"{path} line {number} is not a JSON object")
                row["run_id"] = run_id
                row["_where"] = f"{path} line {number}"
                rows.append(row)
    except UnicodeDecodeError:
        raise ExportError(f"{path} is not UTF-8 text") from None
    except OSError as exc:
        raise ExportError(f"{path}: cannot read it ({exc.strerror})") from None
    return pd.DataFrame(rows)


# --- types -------------------------------------------------------------------------------------

def _typed_runs(runs: pd.DataFrame) -> pd.DataFrame:
    lines: dict[str, dict[str, int]] = {}
    where = []
    for folder, name, run_id in zip(runs["results_folder"], runs["runs_csv"], runs["run_id"]):
        path = str(Path(folder) / name)
        if path not in lines:
            lines[path] = _run_lines(Path(path))
        where.append(f"{path} line {lines[path].get(str(run_id), '?')}")
    typed = {}
    for column in [c for c in runs.columns if not c.startswith("_")]:
        values = runs[column]
        if column == "requests_found":
            typed[column] = values
        elif column == "timestamp":
            typed[column] = _timestamps(values, where, column)
        elif column in BY_NAME:
            typed[column] = _typed(values, BY_NAME[column].type.__name__, where, column)
        else:  # a column this rig's schema does not name: a number where every cell is one
            typed[column] = _guessed(values)
    return pd.DataFrame(typed)


def _run_lines(path: Path) -> dict[str, int]:
    """run_id -> the line of runs.csv holding its row (the last, where listed twice)."""
    with path.open(newline="", encoding="utf-8") as file:
        reader = csv.reader(file)
        header = next(reader, [])
        column = header.index("run_id")
        return {cells[column]: reader.line_num for cells in reader if len(cells) > column}


def _typed_requests(requests: pd.DataFrame) -> pd.DataFrame:
    if requests.empty:
        return pd.DataFrame({name: pd.Series(dtype=_EMPTY_DTYPE.get(kind, kind))
                             for name, kind in REQUEST_TYPES.items()
                             if name not in OPTIONAL_REQUEST_KEYS})
    where = list(requests["_where"])
    typed = {}
    for column in [c for c in requests.columns if c != "_where"]:
        kind = REQUEST_TYPES.get(column)
        values = requests[column]
        if kind == "timestamp":
            typed[column] = _unix_timestamps(values, where, column)
        elif kind is not None and kind.startswith("list<"):
            typed[column] = _lists(values, where, column, int if "int" in kind else str)
        elif kind is not None:
            typed[column] = _typed(values, {"Int64": "int", "float64": "float"}.get(kind, "str"),
                                   where, column)
        else:
            typed[column] = _guessed(values.map(lambda v: v if v is None or isinstance(
                v, (str, int, float)) else json.dumps(v)))
    return pd.DataFrame(typed)


_EMPTY_DTYPE = {"timestamp": "datetime64[ns, UTC]", "list<int64>": "object",
                "list<string>": "object"}


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)) \
        or (isinstance(value, str) and value.strip().lower() in ("", "nan"))


def _absent(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _typed(values: pd.Series, kind: str, where: list[str], column: str) -> pd.Series:
    """`values` as the schema's `kind` (int, float, bool, str); ExportError at the first cell
    that is not one."""
    out: list[Any] = []
    for index, value in enumerate(values):
        if kind == "str":  # "" stays "": NULL is a column its runs.csv did not have
            out.append(None if _absent(value) else redact(str(value)))
            continue
        if _missing(value):
            out.append(None)
            continue
        if kind == "bool":
            text = str(value).strip()
            if isinstance(value, bool) or text in ("True", "False"):
                out.append(value if isinstance(value, bool) else text == "True")
                continue
            raise _bad(where[index], column, value, "True or False")
        if kind == "int":
            whole = _whole(value)
            if whole is None:
                raise _bad(where[index], column, value, "a whole number")
            out.append(whole)
            continue
        number = _number(value)
        if number is None:
            raise _bad(where[index], column, value, "a number")
        out.append(number)
    dtype = {"int": "Int64", "float": "float64", "bool": "boolean", "str": "string"}[kind]
    return pd.Series(pd.array(out, dtype=dtype) if kind != "float" else
                     [math.nan if v is None else v for v in out], index=values.index,
                     dtype=dtype)


_INT64 = 2**63


def _whole(value: Any) -> int | None:
    """A whole number exactly (a nanosecond count past 2**53 too), within BIGINT's range."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        whole = value
    elif isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        whole = int(value.strip())
    else:
        number = _number(value)
        if number is None or number != int(number):
            return None
        whole = int(number)
    return whole if -_INT64 <= whole < _INT64 else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _bad(where: str, column: str, value: Any, what: str) -> ExportError:
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return ExportError(f"{where}: {column} is {shown}, not {what}")


def _guessed(values: pd.Series) -> pd.Series:
    given = [v for v in values if not _missing(v)]
    if given and all(_number(v) is not None for v in given):
        return pd.Series([math.nan if _missing(v) else _number(v) for v in values],
                         index=values.index, dtype="float64")
    return pd.Series([None if _absent(v) else redact(str(v)) for v in values],
                     index=values.index, dtype="string")


def _timestamps(values: pd.Series, where: list[str], column: str) -> pd.Series:
    out = []
    for index, value in enumerate(values):
        if _missing(value):
            out.append(pd.NaT)
            continue
        try:
            stamp = pd.Timestamp(str(value))
        except (ValueError, OverflowError):
            raise _bad(where[index], column, value, "an ISO 8601 time") from None
        out.append(stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC"))
    return pd.Series(pd.to_datetime(out, utc=True), index=values.index).astype(
        "datetime64[ns, UTC]")


def unix_to_ns(value: float) -> int:
    """Unix seconds (a float, as the rig writes `sent_at`) as whole nanoseconds, exactly: the
    decimal the float prints as, times 1e9, so ns_to_unix gives the same float back."""
    return int(Decimal(repr(float(value))).scaleb(9).to_integral_value())


def ns_to_unix(ns: int) -> float:
    return ns / 10**9  # int / int: correctly rounded, the float unix_to_ns was given


def _unix_timestamps(values: pd.Series, where: list[str], column: str) -> pd.Series:
    out: list[Any] = []
    for index, value in enumerate(values):
        if _missing(value):
            out.append(None)
            continue
        number = _number(value)
        if number is None or not 0 <= number < 1e10:
            raise _bad(where[index], column, value, "unix seconds")
        out.append(unix_to_ns(number))
    stamps = [pd.NaT if ns is None else pd.Timestamp(ns, unit="ns", tz="UTC") for ns in out]
    return pd.Series(stamps, index=values.index, dtype="datetime64[ns, UTC]")


def _lists(values: pd.Series, where: list[str], column: str, item: type) -> pd.Series:
    out: list[Any] = []
    for index, value in enumerate(values):
        if _missing(value) if not isinstance(value, list) else False:
            out.append(None)
            continue
        if not isinstance(value, list) or not all(
                isinstance(v, item) and not isinstance(v, bool) for v in value):
            raise _bad(where[index], column, value, f"a list of {item.__name__}")
        out.append([redact(v) for v in value] if item is str else value)
    return pd.Series(out, index=values.index, dtype="object")
