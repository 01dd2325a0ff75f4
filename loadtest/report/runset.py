"""The runs a report covers: every runs.csv row under a results folder, with its files.

A results folder may hold one runs.csv (one `--out`) or many (a sweep writes one per cell), so
every runs.csv below the folder is read; a run listed twice counts once. A run's files are looked
for beside the runs.csv that lists it (`runs/RUN_ID/`), then at its recorded `run_dir`, so a
results folder that was moved or copied still reports fully.

Cells: runs that share engine, flags, gpu and users are repeats of one cell. A heat is one
workload (workload_sha256, labelled by `workload`) at one user count for one model: the runs that
may be compared, whatever engine served them. A model is known by its digest (`model_sha256`), not
by the name its engine served it under: transformers names the tiny model by its path
(`/.../models/tiny-llama`), vLLM and llama.cpp `tiny-llama`, and they are one model. A run
without a digest takes the digest of a run whose model has the same name or the same last path
part (less a `.gguf` suffix: text-generation-webui names llama.cpp's file, llama.cpp its stem);
with none, its model is that last part. Runs of different models are never compared.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pandas as pd

from loadtest.results.schema import BY_NAME, SCHEMA_VERSION, text_columns

__all__ = [
    "CELL",
    "CONFIG",
    "HEAT",
    "MODEL",
    "heat_label",
    "model_label",
    "load_runs",
    "read_requests",
    "read_run_json",
    "read_telemetry",
    "run_file",
    "run_files",
    "select_runs",
]

CONFIG = ["engine", "flags", "gpu"]
# the numbers every section reads; a row without one (an older rig's) shows "-" there
_NUMBERS = ["users", "requests", "failed", "output_tok_per_s", "completion_time_s",
            "client_cpu_max_pct", "avg_output_tokens", "ttft_p50_ms", "ttft_p99_ms",
            "itl_p50_ms", "itl_p99_ms"]
# the counts and measures the report computes with: each a finite number >= 0, whole where the
# schema says int
_COMPUTED = [*_NUMBERS, "completed", "repeat", "processes", "e2e_p99_ms", "rate", "req_per_s",
             "gpu_mem_peak_mib", "gpu_util_mean_pct", "gpu_j_per_output_token",
             "engine_kv_cache_peak_pct", "engine_waiting_peak", "engine_running_peak",
             "engine_held_peak", "goodput_req_per_s", "goodput_tok_per_s", "slo_met_pct"]
_MOST = 1e12  # a count or measure past this is not one a run wrote
CELL = [*CONFIG, "users"]
MODEL = "model_key"  # the model's digest, or its short name where no run recorded one
HEAT = [MODEL, "workload_sha256", "users"]
_TEXT = text_columns()


def load_runs(root: Path) -> pd.DataFrame:
    """Every run row under `root`, one per run_id; empty when there are none. ValueError, in one
    line, for a runs.csv the report cannot read as this rig wrote it (_read_runs_csv)."""
    frames = []
    for path in sorted(root.rglob("runs.csv")):
        frame = _renamed_columns(_read_runs_csv(path))
        frame["_csv_dir"] = str(path.parent)
        frames.append(frame)
    runs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if runs.empty:
        return pd.DataFrame()
    runs = runs.drop_duplicates("run_id", keep="last")
    for column in runs.columns:
        if column not in _TEXT and not column.startswith("_"):
            runs[column] = _numeric(runs[column])
        elif column in _TEXT:  # a column one runs.csv has and another lacks: empty, as written
            runs[column] = runs[column].fillna("")
    for column in {*CELL, "model", "model_sha256", "workload_sha256", "output_tokens_source",
                   "warnings", "tag", "timestamp", "workload"} - {"users"}:
        if column not in runs:
            runs[column] = ""
    for column in _NUMBERS:  # an older rig's row may lack them: empty, not a crash
        if column not in runs:
            runs[column] = float("nan")
    runs[MODEL] = _model_keys(runs)
    return runs.sort_values(["timestamp", "run_id"]).reset_index(drop=True)


def _renamed_columns(runs: pd.DataFrame) -> pd.DataFrame:
    """An older rig's in-process rows wrote their engine's warm-up time as `warmup_s`, the
    column of a timed run's --warmup-s: it moves to `engine_warmup_s`."""
    if "warmup_s" not in runs or "mode" not in runs:
        return runs
    if "engine_warmup_s" not in runs:
        runs["engine_warmup_s"] = ""
    old = (runs["mode"] == "in-process") & (runs["engine_warmup_s"] == "")
    runs.loc[old, "engine_warmup_s"] = runs.loc[old, "warmup_s"]
    runs.loc[old, "warmup_s"] = ""
    return runs


def _model_keys(runs: pd.DataFrame) -> list[str]:
    """Each run's model identity: its digest, or the digest another run recorded for a model of
    the same name (or last path part), or that last part."""
    digest_of: dict[str, str] = {}
    for name, digest in zip(runs["model"].astype(str), runs["model_sha256"].astype(str)):
        if digest:
            digest_of.setdefault(name, digest)
            digest_of.setdefault(_short_name(name), digest)
    keys = []
    for name, digest in zip(runs["model"].astype(str), runs["model_sha256"].astype(str)):
        keys.append(digest or digest_of.get(name) or digest_of.get(_short_name(name))
                    or _short_name(name))
    return keys


def _short_name(model: str) -> str:
    """The last path part, less a ``.gguf`` suffix: text-generation-webui names the model it
    serves by its GGUF file (``llama3-8b.gguf``), llama.cpp by that file's stem."""
    name = Path(model).name or model
    return name[: -len(".gguf")] if name.lower().endswith(".gguf") and len(name) > 5 else name


def _read_runs_csv(path: Path) -> pd.DataFrame:
    """One runs.csv as text cells (short rows of an older rig padded empty). ValueError for a
    file that is not UTF-8, has a row longer than its header (edited by hand), has no run_id
    column, names a column twice, or was written by a newer rig than this one."""
    try:
        with path.open(newline="", encoding="utf-8") as file:
            reader = csv.reader(file)
            header = next(reader, None) or []
            rows = []
            for cells in reader:
                if len(cells) > len(header):
                    raise ValueError(f"{path} line {reader.line_num} has {len(cells)} cells for "
                                     f"{len(header)} columns (edited by hand?)")
                if cells:
                    rows.append(cells + [""] * (len(header) - len(cells)))
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None
    except csv.Error as exc:
        raise ValueError(f"{path} is not a readable CSV ({exc})") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror})") from None
    if not header:
        return pd.DataFrame()
    if "run_id" not in header:
        raise ValueError(f"{path} has no run_id column: not a runs.csv of this rig")
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise ValueError(f"{path} names the column {twice[0]!r} twice (edited by hand?)")
    frame = pd.DataFrame(rows, columns=header, dtype=str)
    _check_numbers(path, frame)
    versions = pd.to_numeric(frame.get("schema_version"), errors="coerce")
    if versions is not None and (versions > SCHEMA_VERSION).any():
        raise ValueError(f"{path} was written by a newer rig (schema_version "
                         f"{versions.max():g}; this rig reads {SCHEMA_VERSION}): report it with "
                         "that rig")
    return frame


def _check_numbers(path: Path, frame: pd.DataFrame) -> None:
    """ValueError naming the first cell of a count or measure that no run writes: text, not
    finite, negative, a count that is not whole (an empty cell or "nan" is a missing value)."""
    for column in [c for c in _COMPUTED if c in frame]:
        whole = BY_NAME[column].type is int
        text = frame[column].str.strip()
        values = pd.to_numeric(text, errors="coerce")
        given = (text != "") & (text.str.lower() != "nan")
        bad = given & ~(values.between(0, _MOST)
                        & ((values % 1 == 0) if whole else True))
        if bad.any():
            index = int(bad.to_numpy().nonzero()[0][0])
            what = "a whole number" if whole else "a number"
            raise ValueError(f"{path} line {index + 2}: {column} is {frame[column].iloc[index]!r}, "
                             f"not {what} from 0 to {_MOST:g}")


def _numeric(column: pd.Series) -> pd.Series:
    """Numbers where every non-empty cell is a number; the text left as it is otherwise. A cell
    is empty as written ("") or missing (NaN: a column another runs.csv under the root lacks)."""
    converted = pd.to_numeric(column, errors="coerce")
    return converted if converted.notna().sum() == (column.notna() & (column != "")).sum() else column


def select_runs(runs: pd.DataFrame, where: list[str]) -> pd.DataFrame:
    """Keep rows matching every `COLUMN=VALUE` (compared as text; `COLUMN=A|B` matches either).
    `heat=WORKLOAD@USERS` picks one workload at one user count: a race's heat."""
    for condition in where:
        column, _, value = condition.partition("=")
        if column == "heat" and column not in runs:
            runs = runs.assign(heat=runs["workload"].astype(str) + "@" + runs["users"].astype(str))
        if column not in runs:
            raise KeyError(f"--where {condition}: no column {column!r} in runs.csv")
        runs = runs[runs[column].astype(str).isin(value.split("|"))]
    return runs


def run_files(run: pd.Series) -> Path | None:
    """The folder holding this run's requests.jsonl (and telemetry), or None if it is gone."""
    found = run_file(run, "requests.jsonl")
    return found.parent if found else None


def run_file(run: pd.Series, name: str) -> Path | None:
    """One of the run's files, beside the runs.csv listing it (runs/RUN_ID/) or at its
    run_dir; None when it is in neither."""
    candidates = [Path(str(run["_csv_dir"])) / "runs" / str(run["run_id"])]
    if run.get("run_dir"):
        candidates.append(Path(str(run["run_dir"])))
    return next((folder / name for folder in candidates if (folder / name).exists()), None)


def read_run_json(run: pd.Series, name: str) -> dict[str, Any]:
    """One of the run's JSON files (run.json, telemetry_summary.json), beside the runs.csv
    listing it or at its run_dir; {} when it is gone or unreadable."""
    path = run_file(run, name)
    if path is None:
        return {}
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def read_requests(folder: Path) -> pd.DataFrame:
    """One row per request, with unix times of send, first chunk and done (`*_at_s`)."""
    rows = _read_jsonl(folder / "requests.jsonl")
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    sent_ns = frame["sent_ns"].astype("float64")
    for name, column in (("first_chunk_at_s", "first_chunk_ns"), ("done_at_s", "done_ns")):
        frame[name] = frame["sent_at"] + (frame[column].astype("float64") - sent_ns) / 1e9
    return frame


def read_telemetry(folder: Path) -> pd.DataFrame:
    """Telemetry samples of a run (see loadtest/telemetry), empty when none were taken."""
    return pd.DataFrame(_read_jsonl(folder / "telemetry.jsonl"))


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    with path.open(encoding="utf-8") as file:
        for line in file:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a torn last line from a killed run
    return rows


def heat_label(heat: pd.DataFrame) -> str:
    """Names a heat for a person: its workload and user count, e.g. "mixed-32x128 at 8 users"."""
    names = ", ".join(sorted(set(heat["workload"].astype(str)))) or "?"
    users = heat["users"].iloc[0]
    return f"{names} at {users:g} user{'' if users == 1 else 's'}"


def model_label(runs: pd.DataFrame) -> str:
    """Names a model by the short names it was served under, and its digest where recorded."""
    names = ", ".join(sorted({_short_name(str(m)) for m in runs["model"]})) or "?"
    digests = sorted({str(d) for d in runs["model_sha256"] if d})
    return names + (f" (sha256 {digests[0][:12]})" if len(digests) == 1 else "")
