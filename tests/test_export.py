"""rig export: results folders as Parquet and DuckDB, checked against the files they came from.

The results are real: the kept race of three CPU engines and llama.cpp's flag layouts on an H100
(evidence/), and a run of the real locustfile against tests/fuzz_engine.py, whose wrong answers
give failed requests of several kinds (a few seconds, no engine: fast tier). The docs' queries
(docs/export.md) run against the export and are checked against pandas on the original files.
Bad folders, files and exports are generated and refused in one line, in-process.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rig_helpers import REPO, run_locust, running_fuzz_engine

from loadtest.export import cli as export_cli
from loadtest.export import store
from loadtest.export.tables import ns_to_unix, unix_to_ns
from loadtest.report.cli import main as report_main

_RACE = REPO / "evidence" / "2026-11-25" / "race-cpu"
_LAYOUTS = REPO / "evidence" / "2026-11-24" / "gpu" / "one-gpu-layouts-h100"
_TWO_GPUS = REPO / "evidence" / "2026-11-24" / "gpu" / "two-gpu-layouts-h200"
_SECRET = "sk-MARKERexport0123456789"
# the fuzz engine's cases: sound answers and wrong ones that fail at once (no timeout waited)
_CASES = [{"kind": "ok"}] * 4 + [{"kind": k} for k in ("html", "empty", "not_http", "no_done",
                                                        "endless", "after_done")]
_DOCS = REPO / "docs" / "export.md"


def _call(main, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def _one_error_line(code: int, err: str) -> None:
    assert "Traceback" not in err, err
    assert code == 2, (code, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err


@pytest.fixture(scope="module")
def fuzz_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run whose requests partly fail, with a secret among its recorded flags."""
    folder = tmp_path_factory.mktemp("fuzz")
    prompts = folder / "cases.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"case{i}", "prompt": json.dumps(case)}) + "\n"
                               for i, case in enumerate(_CASES)))
    with running_fuzz_engine() as url:
        result = run_locust("--host", url, "--engine", "vllm-cpu", "--out", str(folder / "out"),
                            "--prompts", str(prompts), "--users", "4", "--requests",
                            str(len(_CASES)), "--max-tokens", "4", "--read-timeout", "2",
                            "--request-deadline", "3", "--telemetry-interval", "0",
                            f"--flags=--max-num-seqs 4 --api-key {_SECRET}", timeout_s=120)
    assert result.returncode == 1, result.stderr[-3000:]  # failures recorded
    return folder / "out"


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory, fuzz_results: Path) -> list[Path]:
    """The folders exported: copies of the kept results, and the fuzz run."""
    root = tmp_path_factory.mktemp("sources")
    copies = [root / "race-cpu", root / "layouts"]
    for kept, copy in zip((_RACE, _LAYOUTS), copies):
        shutil.copytree(kept, copy, ignore=shutil.ignore_patterns("README.md", "*.png"))
    return [*copies, fuzz_results]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, sources: list[Path]) -> Path:
    out = tmp_path_factory.mktemp("export") / "export"
    code, stdout, err = _call(export_cli.main, *map(str, sources), "--out", str(out))
    assert code == 0, err
    assert "Traceback" not in err and not err, err
    assert stdout.startswith(f"{_runs_csv_rows(sources).__len__()} runs, ")
    return out


def _databases(export: Path) -> list[duckdb.DuckDBPyConnection]:
    """The export's tables twice: in its DuckDB file, and as views on its Parquet files."""
    database = duckdb.connect(str(export / store.DATABASE), read_only=True)
    parquet = duckdb.connect()
    for name in store.TABLES:
        parquet.execute(f"CREATE VIEW {name} AS SELECT * FROM '{export / store.PARQUET[name]}'")
    return [database, parquet]


def _runs_csv_rows(folders: list[Path]) -> list[dict[str, str]]:
    rows = []
    for folder in folders:
        for path in sorted(folder.rglob("runs.csv")):
            with path.open(newline="", encoding="utf-8") as file:
                rows += [{**row, "_folder": str(folder), "_csv": str(path.parent)}
                         for row in csv.DictReader(file)]
    return rows


def _request_lines(folders: list[Path]) -> dict[str, list[dict]]:
    lines = {}
    for row in _runs_csv_rows(folders):
        path = Path(row["_csv"]) / "runs" / row["run_id"] / "requests.jsonl"
        if path.exists():
            lines[row["run_id"]] = [json.loads(line) for line in path.read_text().splitlines()]
    return lines


# --- the tables hold what the files hold -----------------------------------------------------

def test_every_runs_csv_row_is_one_run_with_its_values_and_types(exported: Path,
                                                                 sources: list[Path]):
    rows = _runs_csv_rows(sources)
    for db in _databases(exported):
        runs = db.sql("SELECT * FROM runs").df().set_index("run_id")
        assert sorted(runs.index) == sorted(r["run_id"] for r in rows)
        types = dict(db.sql("SELECT column_name, column_type FROM (DESCRIBE runs)").fetchall())
        assert types["users"] == "BIGINT" and types["output_tok_per_s"] == "DOUBLE"
        assert re.fullmatch(r"TIMESTAMP(TZ| WITH TIME ZONE)\S*", types["timestamp"])
        assert types["ignore_eos"] == "BOOLEAN" and types["engine"] == "VARCHAR"
        for row in rows:
            run = runs.loc[row["run_id"]]
            assert run["results_folder"] == str(Path(row["_folder"]).absolute())
            assert Path(row["_folder"], run["runs_csv"]).parent == Path(row["_csv"])
            for column, cell in row.items():
                if column.startswith("_") or column == "run_id":
                    continue
                value = run[column]
                if cell == "" and types[column] == "VARCHAR":
                    assert value == "", (row["run_id"], column, value)
                elif cell == "":
                    assert pd.isna(value), (row["run_id"], column, value)
                elif column == "timestamp":
                    value = pd.Timestamp(value)
                    value = value.tz_localize("UTC") if value.tzinfo is None else value
                    assert value == pd.Timestamp(cell), (column, cell, value)
                elif types[column] in ("BIGINT", "DOUBLE"):
                    assert value == pytest.approx(float(cell), rel=1e-12), (column, cell, value)
                elif types[column] == "BOOLEAN":
                    assert value == (cell == "True"), (column, cell)
                else:
                    assert value == cell, (column, cell, value)


def test_every_request_line_is_one_row_keyed_by_its_run(exported: Path, sources: list[Path]):
    lines = _request_lines(sources)
    assert sum(map(len, lines.values())) > 450
    for db in _databases(exported):
        counts = dict(db.sql("SELECT run_id, count(*) FROM requests GROUP BY run_id").fetchall())
        assert counts == {run_id: len(records) for run_id, records in lines.items()}
        types = dict(db.sql("SELECT column_name, column_type FROM (DESCRIBE requests)").fetchall())
        assert re.fullmatch(r"TIMESTAMP(TZ| WITH TIME ZONE)\S*", types["sent_at"])
        assert types["sent_ns"] == "BIGINT"
        assert types["chunk_gaps_ns"] == "BIGINT[]" and types["ttft_ms"] == "DOUBLE"
        found = dict(db.sql("SELECT run_id, requests_found FROM runs").fetchall())
        assert {r for r, f in found.items() if f} == set(lines)
    requests = pq.read_table(exported / store.PARQUET["requests"]).to_pandas()
    for run_id, records in lines.items():
        rows = requests[requests["run_id"] == run_id].reset_index(drop=True)
        for record, (_, row) in zip(records, rows.iterrows()):
            assert row["sent_at"].value == unix_to_ns(record["sent_at"])
            assert ns_to_unix(row["sent_at"].value) == record["sent_at"]  # exactly
            assert list(row["chunk_gaps_ns"]) == record["chunk_gaps_ns"]
            for key in ("request_id", "sent_ns", "first_chunk_ns", "done_ns", "output_tokens",
                        "error_kind", "ttft_ms", "e2e_ms", "http_status"):
                assert (pd.isna(row[key]) and record[key] is None) or row[key] == record[key], \
                    (run_id, key, row[key], record[key])


def test_nanosecond_counts_past_float_precision_are_kept_exactly(tmp_path: Path,
                                                                 fuzz_results: Path):
    """A host up for more than 104 days has monotonic stamps past 2**53 ns: kept to the ns."""
    folder = tmp_path / "uptime"
    shutil.copytree(fuzz_results, folder)
    path = next(folder.rglob("requests.jsonl"))
    records = [json.loads(text) for text in path.read_text().splitlines()]
    late = 2**60 + 7
    for record in records:
        for key in ("first_chunk_ns", "done_ns", "sent_ns"):
            if record[key] is not None:
                record[key] += late
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert _call(export_cli.main, str(folder), "--out", str(tmp_path / "e"))[0] == 0
    rows = duckdb.connect(str(tmp_path / "e" / store.DATABASE), read_only=True).sql(
        "SELECT sent_ns, done_ns FROM requests ORDER BY rowid").fetchall()
    assert rows == [(r["sent_ns"], r["done_ns"]) for r in records]


def test_the_export_holds_no_secret_and_keeps_the_redacted_flag(exported: Path,
                                                                fuzz_results: Path):
    for path in exported.iterdir():
        assert _SECRET.encode() not in path.read_bytes(), path
    [flags] = duckdb.connect(str(exported / store.DATABASE), read_only=True).sql(
        "SELECT flags FROM runs WHERE results_folder = ?",
        params=[str(fuzz_results.absolute())]).fetchall()[0]
    assert flags == "--max-num-seqs 4 --api-key ***"


def test_a_secret_an_older_rig_left_in_runs_csv_is_redacted(tmp_path: Path):
    folder = tmp_path / "old"
    shutil.copytree(_LAYOUTS, folder)
    text = (folder / "runs.csv").read_text()
    (folder / "runs.csv").write_text(text.replace("REPLICAS=2", f"REPLICAS=2 HF_TOKEN={_SECRET}"))
    code, _, err = _call(export_cli.main, str(folder), "--out", str(tmp_path / "e"))
    assert code == 0, err
    for path in (tmp_path / "e").iterdir():
        assert _SECRET.encode() not in path.read_bytes(), path


def test_a_run_in_two_folders_is_exported_once_with_a_note(tmp_path: Path):
    shutil.copytree(_LAYOUTS, tmp_path / "a")
    shutil.copytree(_LAYOUTS, tmp_path / "b")
    code, _, err = _call(export_cli.main, str(tmp_path / "a"), str(tmp_path / "b"), "--out",
                         str(tmp_path / "e"))
    assert code == 0 and err.count("note: run ") == len(_runs_csv_rows([_LAYOUTS])), err
    assert len(pd.read_parquet(tmp_path / "e" / "runs.parquet")) == len(_runs_csv_rows([_LAYOUTS]))


# --- the docs' queries, answered as the files answer them ------------------------------------

def _doc_queries() -> dict[str, str]:
    """docs/export.md's questions (its ### headings) and the first SQL block under each."""
    queries = {}
    for part in re.split(r"^### ", _DOCS.read_text(), flags=re.M)[1:]:
        title, body = part.split("\n", 1)
        block = re.search(r"```sql\n(.*?)```", body, flags=re.S)
        if block:
            queries[title.strip()] = block.group(1)
    return queries


def test_every_query_in_the_docs_runs_on_both_forms_of_the_export(exported: Path):
    blocks = re.findall(r"```sql\n(.*?)```", _DOCS.read_text(), flags=re.S)
    assert len(blocks) >= 4
    for db in _databases(exported):
        for block in blocks:
            for statement in filter(str.strip, block.split(";")):
                db.sql(statement).fetchall()  # no error: every column and table it names exists


def test_the_docs_ask_the_three_questions():
    assert {"p99 TTFT by engine and users across every run of this model",
            "Which flags gave the best tok/s at 128 users",
            "Failed requests by error kind per engine"} <= set(_doc_queries())


def _requests_frame(sources: list[Path]) -> pd.DataFrame:
    runs = {r["run_id"]: r for r in _runs_csv_rows(sources)}
    return pd.DataFrame([{**record, "engine": runs[run_id]["engine"],
                          "users": int(runs[run_id]["users"]), "model": runs[run_id]["model"]}
                         for run_id, records in _request_lines(sources).items()
                         for record in records])


def test_p99_ttft_by_engine_and_users_is_the_requests_own(exported: Path, sources: list[Path]):
    frame = _requests_frame(sources)
    frame = frame[frame["model"].str.endswith("tiny-llama") & frame["error_kind"].isna()
                  & frame["ttft_ms"].notna()]
    expected = sorted((engine, users, len(g), round(float(np.percentile(g["ttft_ms"], 99)), 1))
                      for (engine, users), g in frame.groupby(["engine", "users"]))
    assert len({e for e, *_ in expected}) == 3  # the three engines of the race
    for db in _databases(exported):
        answer = db.sql(_doc_queries()[
            "p99 TTFT by engine and users across every run of this model"]).fetchall()
        assert answer == expected


def test_the_best_flags_at_128_users_are_runs_csvs(exported: Path, sources: list[Path]):
    runs = pd.DataFrame(_runs_csv_rows(sources))
    runs = runs[(runs["users"] == "128") & (runs["verdict"] == "valid")]
    runs = runs.assign(tok_s=runs["output_tok_per_s"].astype(float))
    expected = sorted(((engine, flags, len(g), round(g["tok_s"].mean(), 1))
                       for (engine, flags), g in runs.groupby(["engine", "flags"])),
                      key=lambda line: -line[3])
    assert len(expected) >= 2
    for db in _databases(exported):
        answer = db.sql(_doc_queries()["Which flags gave the best tok/s at 128 users"]).fetchall()
        assert answer == expected


def test_failed_requests_by_kind_and_engine_are_the_records(exported: Path, sources: list[Path]):
    frame = _requests_frame(sources)
    failed = frame[frame["error_kind"].notna()]
    expected = sorted(((engine, kind, len(g)) for (engine, kind), g
                       in failed.groupby(["engine", "error_kind"])),
                      key=lambda line: (line[0], -line[2], line[1]))
    assert len({kind for _, kind, _ in expected}) >= 3  # the fuzz engine's several wrongs
    for db in _databases(exported):
        answer = db.sql(_doc_queries()["Failed requests by error kind per engine"]).fetchall()
        assert answer == expected


# --- the report reads the export as it reads the folders -------------------------------------

def _report_text(path: Path) -> str:
    """report.md less the line naming its source and when it was written."""
    text = (path / "report.md").read_text()
    return re.sub(r" from `[^`]*`, (.*); written \S+\.", r", \1.", text)


def test_the_report_of_an_export_is_the_report_of_its_folder(tmp_path: Path, fuzz_results: Path):
    """A folder of runs that kept only their GPU telemetry summaries, and below it a run that
    kept its requests and run.json (a sweep's cell): the same report from the folder and from
    the export."""
    folder = tmp_path / "results"
    shutil.copytree(_TWO_GPUS, folder, ignore=shutil.ignore_patterns("README.md", "*.png"))
    shutil.copytree(fuzz_results, folder / "fuzz")
    assert _call(export_cli.main, str(folder), "--out", str(tmp_path / "e"))[0] == 0
    code, from_folder, err = _call(report_main, str(folder), "--out", str(tmp_path / "a"))
    assert code == 0, err
    assert "GPU" in from_folder and "vllm-cpu" in from_folder  # both kinds of run reported
    out = tmp_path / "b"
    code, from_export, err = _call(report_main, str(tmp_path / "e" / store.DATABASE), "--out",
                                   str(out))
    assert code == 0, err
    assert from_export == from_folder  # the tables printed
    assert _report_text(out) == _report_text(tmp_path / "a")
    assert sorted(p.relative_to(out) for p in out.rglob("*.png")) == sorted(
        p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.png"))
    # the Parquet files hold the tables the database holds, so their report is this one too
    parquet, database = store.read_export(tmp_path / "e"), store.read_export(
        tmp_path / "e" / store.DATABASE)
    for name in store.TABLES:
        pd.testing.assert_frame_equal(getattr(parquet, name), getattr(database, name),
                                      check_dtype=False)


def test_the_report_of_a_database_goes_beside_it_by_default(tmp_path: Path):
    assert _call(export_cli.main, str(_LAYOUTS), "--out", str(tmp_path / "e"))[0] == 0
    code, _, err = _call(report_main, str(tmp_path / "e" / store.DATABASE))
    assert code == 0, err
    assert (tmp_path / "e" / "report" / "report.md").exists()
    assert str(tmp_path / "e" / store.DATABASE) in (tmp_path / "e" / "report" / "report.md").read_text()


def test_an_export_written_into_a_results_folder_does_not_hide_its_runs(tmp_path: Path):
    folder = tmp_path / "results"
    shutil.copytree(_LAYOUTS, folder)
    assert _call(export_cli.main, str(folder), "--out", str(folder))[0] == 0
    (folder / "runs.csv").write_text((folder / "runs.csv").read_text().replace(
        "MAX_CONCURRENT_REQUESTS=256", "MAX_CONCURRENT_REQUESTS=512"))  # newer than the export
    code, out, err = _call(report_main, str(folder), "--out", str(tmp_path / "r"))
    assert code == 0, err
    assert "MAX_CONCURRENT_REQUESTS=512" in out


# --- whole files, or none --------------------------------------------------------------------

def test_a_failed_export_leaves_the_last_one_whole_and_no_part(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch):
    out = tmp_path / "e"
    assert _call(export_cli.main, str(_LAYOUTS), "--out", str(out))[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(pq, "write_table", full_disk)
        code, _, err = _call(export_cli.main, str(_RACE), "--out", str(out))
    _one_error_line(code, err)
    assert "No space left" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no staging folder left
    assert _call(export_cli.main, str(_RACE), "--out", str(out))[0] == 0  # then replaced whole
    assert sorted(p.name for p in out.iterdir()) == sorted(before)
    assert len(pd.read_parquet(out / "runs.parquet")) == len(_runs_csv_rows([_RACE]))


# An export killed after its first rename: Python's own os.replace, then SIGKILL at the second
_KILLED_MID_SWAP = """
import os, signal, sys
from loadtest.export import cli, store
renames = []
def replace(src, dst, _replace=os.replace):
    if renames and not str(dst).endswith(store.MANIFEST):
        os.kill(os.getpid(), signal.SIGKILL)
    renames.append(dst)
    _replace(src, dst)
store.os.replace = replace
sys.exit(cli.main(sys.argv[1:]))
"""


def test_an_export_killed_between_two_renames_is_refused_whole_until_written_again(
        tmp_path: Path):
    out = tmp_path / "e"
    assert _call(export_cli.main, str(_LAYOUTS), "--out", str(out))[0] == 0
    old = {p.name: p.read_bytes() for p in out.iterdir()}
    killed = subprocess.run([sys.executable, "-c", _KILLED_MID_SWAP, str(_RACE), "--out",
                             str(out)], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert killed.returncode == -9, killed.stderr
    now = {p.name: p.read_bytes() for p in out.iterdir() if not p.name.startswith(".")}
    mixed = [name for name in now if now[name] != old.get(name)]
    assert store.MANIFEST not in now and len(mixed) == 1  # one file new, the rest old
    with pytest.raises(store.ExportError, match="cut short"):
        store.read_export(out)
    code, _, err = _call(report_main, str(out), "--out", str(tmp_path / "r"))
    _one_error_line(code, err)
    assert "cut short" in err and not (tmp_path / "r").exists()
    assert _call(export_cli.main, str(_RACE), "--out", str(out))[0] == 0  # written again: whole
    assert len(store.read_export(out).runs) == len(_runs_csv_rows([_RACE]))


def test_an_export_whose_file_was_swapped_since_is_refused(tmp_path: Path):
    first, second = tmp_path / "a", tmp_path / "b"
    for source, out in ((_LAYOUTS, first), (_RACE, second)):
        assert _call(export_cli.main, str(source), "--out", str(out))[0] == 0
    shutil.copy(second / store.PARQUET["requests"], first / store.PARQUET["requests"])
    with pytest.raises(store.ExportError, match="requests.parquet is not the file"):
        store.read_export(first)


def test_rig_export_runs_as_a_user_runs_it(tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "loadtest.cli.main", "export", str(_LAYOUTS),
                           "--out", str(tmp_path / "e")], capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "e").iterdir()) == sorted(
        [*store.PARQUET.values(), store.DATABASE, store.MANIFEST])
    done = subprocess.run([sys.executable, "-m", "loadtest.cli.main", "export",
                           str(tmp_path / "nope")], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    _one_error_line(done.returncode, done.stderr)
    assert not (tmp_path / "export").exists()


# --- bad folders and exports, generated ------------------------------------------------------

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
# a cell each column type refuses, by column: a count, a measure, a flag, the start time
_BAD_CELLS = {
    "users": st.one_of(_TEXT.filter(lambda t: t.strip().lower() not in ("", "nan")
                                    and not re.fullmatch(r"\s*[+-]?\d+(\.0*)?\s*", t)),
                       st.sampled_from(["1.5", "-3", "inf", "1e999"])),
    "ttft_p99_ms": st.one_of(st.sampled_from(["fast", "inf", "-1", "1e999", "--"]),
                             _TEXT.filter(lambda t: not _number(t))),
    "ignore_eos": st.sampled_from(["yes", "1", "true", "TRUE", "no"]),
    "timestamp": st.sampled_from(["yesterday", "2026-13-45T99:00:00Z", "noon", "1e999"]),
}


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return text.strip().lower() in ("", "nan")
    return True


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bad")


_untimed = settings(max_examples=12, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.function_scoped_fixture])


@_untimed
@given(column=st.sampled_from(sorted(_BAD_CELLS)), data=st.data())
def test_a_cell_no_run_writes_is_refused_in_one_line_naming_it(column: str, data: st.DataObject,
                                                               scratch: Path):
    value = data.draw(_BAD_CELLS[column])
    folder = scratch / "cell"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    with (_LAYOUTS / "runs.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    rows[1][column] = value
    with (folder / "runs.csv").open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, _, err = _call(export_cli.main, str(folder), "--out", str(scratch / "out"))
    _one_error_line(code, err)
    assert column in err and "line 3" in err, err
    assert not (scratch / "out").exists()


_REQUEST_WRONGS = st.sampled_from([
    ("sent_at", "noon"), ("sent_at", -5), ("sent_ns", "many"), ("sent_ns", 1.5),
    ("sent_ns", 2**63), ("request_id", -(2**70)), ("sent_at", True), ("worker", False),
    ("chunk_gaps_ns", "12,13"), ("chunk_gaps_ns", [1, "x"]), ("output_tokens", [3]),
    ("http_status", {"a": 1}), ("engine_flaws", [1, 2]), ("ttft_ms", "slow")])


@_untimed
@given(wrong=_REQUEST_WRONGS, line=st.integers(0, 3))
def test_a_request_field_of_the_wrong_type_is_refused_in_one_line(wrong: tuple, line: int,
                                                                  scratch: Path,
                                                                  fuzz_results: Path):
    key, value = wrong
    folder = scratch / "requests"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(fuzz_results, folder)
    path = next(folder.rglob("requests.jsonl"))
    records = [json.loads(text) for text in path.read_text().splitlines()]
    records[line][key] = value
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, _, err = _call(export_cli.main, str(folder), "--out", str(scratch / "out"))
    _one_error_line(code, err)
    assert key in err and f"line {line + 1}" in err, err
    assert not (scratch / "out").exists()


@_untimed
@given(content=st.one_of(st.binary(max_size=64), _TEXT.map(str.encode),
                         st.sampled_from([b"run_id,users\nr1,2,3,4\n", b"engine,users\nx,1\n",
                                          b"run_id,run_id\na,b\n", b"\xff\xfe\x00bad",
                                          b"timestamp,run_id,users\n,r,-4\n"])),
       where=st.sampled_from(["runs.csv", "cell/runs.csv"]))
def test_a_runs_csv_the_rig_cannot_read_is_one_error_line(content: bytes, where: str,
                                                          scratch: Path):
    folder = scratch / "csv"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / where).parent.mkdir(parents=True)
    (folder / where).write_bytes(content)
    code, _, err = _call(export_cli.main, str(folder), "--out", str(scratch / "out"))
    _one_error_line(code, err)
    assert not (scratch / "out").exists()


@_untimed
@given(name=_TEXT.filter(lambda t: t not in ("", ".", "..") and "/" not in t and "\0" not in t),
       kind=st.sampled_from(["missing", "file", "empty"]))
def test_a_missing_or_empty_folder_is_one_error_line(name: str, kind: str, scratch: Path):
    path = scratch / "folders" / name
    shutil.rmtree(scratch / "folders", ignore_errors=True)
    (scratch / "folders").mkdir()
    if kind == "file":
        path.write_text("not a folder\n")
    elif kind == "empty":
        path.mkdir()
    code, _, err = _call(export_cli.main, str(_LAYOUTS), str(path), "--out", str(scratch / "out"))
    _one_error_line(code, err)
    assert not (scratch / "out").exists()


@_untimed
@given(content=st.binary(max_size=256), form=st.sampled_from(["duckdb", "parquet"]))
def test_an_export_that_is_not_one_is_refused_by_the_report_in_one_line(content: bytes,
                                                                        form: str, scratch: Path):
    folder = scratch / "not-export"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    path = folder / ("results.duckdb" if form == "duckdb" else "runs.parquet")
    path.write_bytes(content)
    code, _, err = _call(report_main, str(path if form == "duckdb" else folder), "--out",
                         str(scratch / "report"))
    _one_error_line(code, err)
    assert not (scratch / "report").exists()
