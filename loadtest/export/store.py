"""The export's files, written whole or not at all, and read back.

    OUT/runs.parquet        the runs table (loadtest/export/tables.py)
    OUT/requests.parquet    the requests table, keyed by run_id
    OUT/run_files.parquet   each run's other files the report reads, as text
    OUT/results.duckdb      the same three tables in one DuckDB database
    OUT/export.json         the manifest: the files above and their sizes, written last

Every file is written into a hidden folder beside OUT's and renamed into place once complete and
synced, so a reader (or a crash) sees the old file or the new one, never a part. The export is
whole too, not only each file: the old manifest goes before the first rename and the new one
comes after the last, so a crash between two renames (old and new files mixed) leaves no
manifest, and read_export() refuses a folder without one. The Parquet files
carry the tables' types (pyarrow); the database is made from the very same Arrow tables.
read_export() reads either form back, and write_results_folder() lays tables out as the results
folder they came from (runs.csv per folder, runs/RUN_ID/requests.jsonl and the run's files), for
the report.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from loadtest.export.tables import (EXTRA_RUN_COLUMNS, OPTIONAL_REQUEST_KEYS, REQUEST_TYPES,
                                    ExportError, Tables, ns_to_unix)
from loadtest.results.files import write_csv

__all__ = ["DATABASE", "MANIFEST", "PARQUET", "is_export", "read_export", "write_export",
           "write_results_folder"]

TABLES = ("runs", "requests", "run_files")
PARQUET = {name: f"{name}.parquet" for name in TABLES}
DATABASE = "results.duckdb"
MANIFEST = "export.json"


def _arrow_type(kind: str) -> Any:
    import pyarrow as pa

    return {"Int64": pa.int64(), "float64": pa.float64(), "string": pa.string(),
            "timestamp": pa.timestamp("ns", tz="UTC"), "list<int64>": pa.list_(pa.int64()),
            "list<string>": pa.list_(pa.string())}[kind]


def _arrow(name: str, frame: pd.DataFrame) -> Any:
    """`frame` as an Arrow table, the requests' known columns under their declared types (a
    column that is NULL throughout would otherwise have none)."""
    import pyarrow as pa

    if name != "requests":
        return pa.Table.from_pandas(frame, preserve_index=False)
    fields = [pa.field(c, _arrow_type(REQUEST_TYPES[c])) if c in REQUEST_TYPES
              else pa.field(c, pa.float64() if frame[c].dtype == "float64" else pa.string())
              for c in frame.columns]
    return pa.Table.from_pandas(frame, schema=pa.schema(fields), preserve_index=False)


def write_export(tables: Tables, out: Path) -> list[Path]:
    """Write the Parquet files and the database under `out`; the paths written."""
    import duckdb
    import pyarrow.parquet as pq

    import pyarrow as pa

    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out, prefix=".export-"))
    try:
        try:
            arrow = {name: _arrow(name, getattr(tables, name)) for name in TABLES}
            for name, table in arrow.items():
                pq.write_table(table, staging / PARQUET[name])
            database = duckdb.connect(str(staging / DATABASE))
            try:
                for name, table in arrow.items():
                    database.register("_frame", table)
                    database.execute(f"CREATE TABLE {name} AS SELECT * FROM _frame")
                    database.unregister("_frame")
                database.execute("CHECKPOINT")
            finally:
                database.close()
        except (pa.ArrowException, duckdb.Error) as exc:
            raise ExportError(f"cannot write the export under {out} ({_first_line(exc)})") \
                from None
        return _swap_in(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _swap_in(staging: Path, out: Path) -> list[Path]:
    """Move the staged files into `out` as one export: no manifest while they are renamed."""
    files = [*PARQUET.values(), DATABASE]
    for file in files:
        _sync(staging / file)
    manifest = {"files": {f: (staging / f).stat().st_size for f in files}}
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    _sync(staging / MANIFEST)
    (out / MANIFEST).unlink(missing_ok=True)
    _sync_folder(out)  # the old manifest is gone before any of its files is replaced
    for file in files:
        os.replace(staging / file, out / file)
    _sync_folder(out)
    os.replace(staging / MANIFEST, out / MANIFEST)
    _sync_folder(out)
    return [out / f for f in (*files, MANIFEST)]


def _sync(path: Path) -> None:
    with path.open("rb") as file:
        os.fsync(file.fileno())


def _sync_folder(path: Path) -> None:
    """Make the renames in `path` durable, in the order they were made."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _check_manifest(path: Path) -> None:
    """An export folder's files are the ones its manifest lists: ExportError, in one line, for
    one an export left cut short (no manifest) or whose files were changed since."""
    try:
        listed = json.loads((path / MANIFEST).read_text(encoding="utf-8"))["files"]
    except FileNotFoundError:
        raise ExportError(f"{path} has no {MANIFEST}: an export cut short (its files may be of "
                          "two exports), or one from before manifests; run rig export again") \
            from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ExportError(f"{path}/{MANIFEST} cannot be read ({_first_line(exc)}); run rig "
                          "export again") from None
    for name, size in listed.items():
        file = path / _inside(str(name))
        if not file.is_file() or file.stat().st_size != size:
            raise ExportError(f"{path}: {name} is not the file {MANIFEST} lists (changed since "
                              "the export); run rig export again")


def is_export(path: Path) -> bool:
    """Whether `path` is an export: a DuckDB file, or a folder holding runs.parquet and no
    runs.csv (an export written into a results folder does not hide the folder's own runs)."""
    if path.is_file():
        return path.suffix == ".duckdb"
    return (path / PARQUET["runs"]).is_file() and not any(path.rglob("runs.csv"))


def read_export(path: Path) -> Tables:
    """The tables of an export folder (its Parquet files) or of its DuckDB file; ExportError, in
    one line, for one that is not an export this rig can read."""
    try:
        if path.is_file():
            return _read_database(path)
        import pyarrow.parquet as pq

        _check_manifest(path)
        frames = {}
        for name in TABLES:
            file = path / PARQUET[name]
            if not file.is_file():
                raise ExportError(f"{path} has no {PARQUET[name]}: not a folder rig export wrote")
            frames[name] = pq.read_table(file).to_pandas()
        return _checked(path, frames)
    except ExportError:
        raise
    except Exception as exc:  # pyarrow's and duckdb's errors have no common base
        raise ExportError(f"{path} cannot be read as an export ({_first_line(exc)})") from None


def _read_database(path: Path) -> Tables:
    import duckdb

    database = duckdb.connect(str(path), read_only=True)
    try:
        names = {row[0] for row in database.execute(
            "SELECT table_name FROM information_schema.tables").fetchall()}
        missing = [n for n in TABLES if n not in names]
        if missing:
            raise ExportError(f"{path} has no {missing[0]} table: not a database rig export wrote")
        # rowid: the order the rows were written in (each run's requests in their file's order)
        frames = {n: _arrow_of(database.sql(f"SELECT * FROM {n} ORDER BY rowid")).to_pandas()
                  for n in TABLES}
    finally:
        database.close()
    return _checked(path, frames)


def _arrow_of(relation: Any) -> Any:
    """A DuckDB relation's rows as an Arrow table (to_arrow_table from DuckDB 1.4 on)."""
    to_table = getattr(relation, "to_arrow_table", None) or relation.fetch_arrow_table
    return to_table()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _checked(path: Path, frames: dict[str, pd.DataFrame]) -> Tables:
    for name, needs in (("runs", ("run_id", "runs_csv", "results_folder", "requests_found")),
                        ("requests", ("run_id",)), ("run_files", ("run_id", "name", "content"))):
        lacking = [c for c in needs if c not in frames[name]]
        if lacking:
            raise ExportError(f"{path}: its {name} table has no {lacking[0]} column: not an "
                              "export of this rig")
    return Tables(frames["runs"], frames["requests"], frames["run_files"])


# --- back to a results folder ------------------------------------------------------------------

def write_results_folder(tables: Tables, root: Path) -> None:
    """Lay `tables` out under `root` as the folders they were exported from: per results folder
    and runs.csv, that runs.csv (the columns its rows hold, the export's own left out) and each
    run's runs/RUN_ID/ with requests.jsonl (where one was found) and its other files."""
    runs = tables.runs
    folders = {f: i for i, f in enumerate(dict.fromkeys(runs["results_folder"].astype(str)))}
    requests = dict(tuple(tables.requests.groupby("run_id", sort=False))) \
        if not tables.requests.empty else {}
    files = dict(tuple(tables.run_files.groupby("run_id", sort=False))) \
        if not tables.run_files.empty else {}
    own = [c for c in runs.columns if c not in EXTRA_RUN_COLUMNS]
    for (folder, runs_csv), group in runs.groupby(["results_folder", "runs_csv"], sort=False):
        path = root / str(folders[str(folder)]) / _inside(str(runs_csv))
        columns = [c for c in own if c == "run_id" or group[c].notna().any()]
        write_csv(path, columns, [{c: _cell(row[c]) for c in columns}
                                  for _, row in group.iterrows()])
        for _, run in group.iterrows():
            run_dir = path.parent / "runs" / _inside(str(run["run_id"]))
            if bool(run["requests_found"]):
                run_dir.mkdir(parents=True, exist_ok=True)
                _write_requests(run_dir / "requests.jsonl", requests.get(run["run_id"]))
            for _, file in (files.get(run["run_id"], pd.DataFrame()).iterrows()):
                run_dir.mkdir(parents=True, exist_ok=True)
                (run_dir / _inside(str(file["name"]))).write_text(str(file["content"]),
                                                                  encoding="utf-8")


def _inside(relative: str) -> Path:
    """A path from the tables, kept inside the folder it is joined to."""
    parts = [p for p in Path(relative).parts if p not in ("", ".", "..", "/")]
    return Path(*parts) if parts else Path("_")


def _cell(value: Any) -> str:
    if _null(value):
        return ""
    if isinstance(value, pd.Timestamp):
        value = value.tz_convert("UTC") if value.tzinfo else value
        text = value.strftime("%Y-%m-%dT%H:%M:%S")
        fraction = value.strftime("%f").rstrip("0")
        return text + (f".{fraction}" if fraction else "") + "Z"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _null(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and math.isnan(value)


def _write_requests(path: Path, requests: pd.DataFrame | None) -> None:
    lines = []
    if requests is not None:
        columns = list(requests.columns)
        for values in requests.itertuples(index=False, name=None):
            row = {}
            for column, value in zip(columns, values):
                value = _json_value(column, value)
                if value is None and (column in OPTIONAL_REQUEST_KEYS
                                      or column not in REQUEST_TYPES):
                    continue  # a key the rig leaves out of a line it does not apply to
                row[column] = value
            lines.append(json.dumps(row, separators=(",", ":")) + "\n")
    path.write_text("".join(lines), encoding="utf-8")


def _json_value(column: str, value: Any) -> Any:
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()  # a list column read back as an array
    if isinstance(value, list):
        return value
    if _null(value):
        return None
    if isinstance(value, pd.Timestamp):
        return ns_to_unix(int(value.value))
    kind = REQUEST_TYPES.get(column)
    if kind == "Int64":
        return int(value)
    if kind == "float64" or isinstance(value, float):
        return float(value)
    if hasattr(value, "item"):
        return value.item()
    return value
