"""Results folders the rig cannot simply add to: a runs.csv edited by hand, not UTF-8, or written by
a newer rig is refused before the run in one line; an older one gets the new row; a disk that is
full, or fills during the run, is one error line and exit 2, never a traceback or a torn file.
The report reads the same folders: it refuses what a run refuses, in one line, writing nothing,
reports an older rig's rows, and never answers generated runs.csv files or options with a
traceback."""

from __future__ import annotations

import csv
import io
import string
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loadtest.inprocess.latency import main as latency_main
from loadtest.report.cli import main as report
from loadtest.sweep.rates import main as rates_main
from rig_helpers import free_port, run_locust

SMALL_RUN = ("--users", "2", "--requests", "4", "--max-tokens", "8", "--ignore-eos",
             "--telemetry-interval", "0")


def _refused_before_the_run(out: Path, message: str) -> None:
    before = (out / "runs.csv").read_bytes()
    # nothing listens on this port: a refusal here comes before the engine is asked anything
    result = run_locust("--host", f"http://127.0.0.1:{free_port()}", "--out", str(out))
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]
    assert (out / "runs.csv").read_bytes() == before
    assert not (out / "runs").exists()


def test_runs_csv_edited_by_hand_is_refused(tmp_path: Path):
    (tmp_path / "runs.csv").write_text("schema_version,run_id,engine\n1,a,vllm\n1,b,vllm,oops\n")
    _refused_before_the_run(tmp_path, "runs.csv line 3 has 4 cells for 3 columns")


def test_runs_csv_that_is_not_utf8_is_refused(tmp_path: Path):
    (tmp_path / "runs.csv").write_bytes("run_id,engine\ncaf\u00e9,vllm\n".encode("latin-1"))
    _refused_before_the_run(tmp_path, "runs.csv is not UTF-8 text")


def test_runs_csv_of_a_newer_rig_is_refused(tmp_path: Path):
    (tmp_path / "runs.csv").write_text("schema_version,run_id,engine\n99,a,vllm\n")
    _refused_before_the_run(tmp_path, "written by a newer rig (schema_version 99")


def test_a_csv_that_is_not_a_runs_csv_is_refused(tmp_path: Path):
    (tmp_path / "runs.csv").write_text("name,score\nx,1\n")
    _refused_before_the_run(tmp_path, "has no run_id column")


_BROKEN = {  # runs.csv bytes a run refuses, and what the report's one line says of them
    "edited by hand": (b"schema_version,run_id,engine\n1,a,vllm\n1,b,vllm,oops\n",
                       "line 3 has 4 cells for 3 columns"),
    "not UTF-8": ("run_id,engine\ncaf\u00e9,vllm\n".encode("latin-1"), "is not UTF-8 text"),
    "a newer rig's": (b"schema_version,run_id,engine\n99,a,vllm\n", "written by a newer rig"),
    "not a runs.csv": (b"name,score\nx,1\n", "has no run_id column"),
    "a column twice": (b"run_id,users,users\na,1,2\n", "names the column 'users' twice"),
}


def _command(main: Callable[[list[str]], int], argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's refusal, or fail()
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _report(folder: Path, *args: str) -> tuple[int, str, str]:
    return _command(report, [str(folder), *args])


@pytest.mark.parametrize("kind", sorted(_BROKEN))
def test_the_report_refuses_a_runs_csv_a_run_refuses_in_one_line(kind: str, tmp_path: Path):
    data, message = _BROKEN[kind]
    (tmp_path / "cell").mkdir()
    (tmp_path / "cell" / "runs.csv").write_bytes(data)
    code, out, err = _report(tmp_path)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert not (tmp_path / "report").exists()  # nothing written


@pytest.mark.parametrize("kind", sorted(_BROKEN))
@pytest.mark.parametrize("command", ["latency-table", "sweep rates"])
def test_the_other_readers_of_runs_csv_refuse_it_in_one_line(command: str, kind: str,
                                                              tmp_path: Path):
    """`rig latency-table` and `rig sweep rates` read runs.csv as the report does: a file it
    refuses is one error line and exit 2 (the sweep's before it starts or sends anything)."""
    data, message = _BROKEN[kind]
    (tmp_path / "runs.csv").write_bytes(data)
    if command == "latency-table":
        code, out, err = _command(latency_main, [str(tmp_path)])
    else:  # nothing listens on this port: a refusal here comes before any engine is asked
        code, out, err = _command(rates_main, ["vllm-cpu", "--host", f"http://127.0.0.1:{free_port()}",
                                               "--rates", "1", "--out", str(tmp_path)])
        assert not (tmp_path / "sweeps").exists()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err


def test_the_report_reads_an_older_rigs_rows(tmp_path: Path):
    (tmp_path / "runs.csv").write_text("timestamp,run_id,engine,users,output_tok_per_s\n"
                                       "2026-01-01T00:00:00Z,old-run,vllm-cpu,8,123.4\n")
    code, out, _ = _report(tmp_path)
    assert code == 0 and "| vllm-cpu | (defaults) | - | 8 | 1 | 123.4 |" in out


_COLUMNS = ["timestamp", "engine", "model", "model_sha256", "flags", "gpu", "users", "requests",
            "failed", "output_tok_per_s", "completion_time_s", "workload", "workload_sha256",
            "verdict", "verdict_reasons", "warnings", "client_cpu_max_pct", "repeat", "rate",
            "run_dir", "schema_version", "ttft_p99_ms"]
_CELL = st.one_of(st.just(""), st.integers(-5, 300).map(str),
                  st.floats(allow_nan=True, allow_infinity=True).map(str),
                  st.sampled_from(["valid", "invalid", "nan", "inf", "-1", "1e400", "x;y", "usage"]),
                  st.text(string.printable.replace("\r", ""), max_size=12))


@st.composite
def _runs_csv(draw: st.DrawFn) -> str:
    columns = ["run_id", *draw(st.lists(st.sampled_from(_COLUMNS), unique=True, max_size=12))]
    rows = [[f"r{index}", *draw(st.lists(_CELL, min_size=len(columns) - 1,
                                         max_size=len(columns) - 1))]
            for index in range(draw(st.integers(1, 6)))]
    text = io.StringIO()
    csv.writer(text).writerows([columns, *rows])
    return text.getvalue()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_runs_csv())
@example("run_id,flags,timestamp\r\nr0,,\r\nr1,0,\r\n")  # no engine, gpu or users column
def test_a_generated_runs_csv_is_reported_or_refused_in_one_line_never_a_traceback(text: str):
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "runs.csv").write_text(text)
        code, _, err = _report(Path(folder))
    assert code in (0, 2), err
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("error: "), err


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["--slo-share", "--where", "--failed", "--baseline"]),
       st.text(string.printable.replace("\r", ""), max_size=20))
def test_generated_report_options_are_taken_or_refused_in_one_line(option: str, value: str):
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "runs.csv").write_text(
            "run_id,engine,users,output_tok_per_s,completion_time_s,requests,failed\n"
            "a,vllm-cpu,4,100,10,32,0\n")
        code, _, err = _report(Path(folder), f"{option}={value}")
    assert code in (0, 2), err
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("error: "), err


def test_runs_csv_of_an_older_rig_gets_the_new_row(engine_url: str, tmp_path: Path):
    # an older rig wrote fewer columns and no schema_version
    (tmp_path / "runs.csv").write_text("timestamp,run_id,engine,users,output_tok_per_s\n"
                                       "2026-01-01T00:00:00Z,old-run,vllm-cpu,8,123.4\n")
    result = run_locust("--host", engine_url, "--out", str(tmp_path), *SMALL_RUN)
    assert result.returncode == 0, result.stderr[-2000:]
    with open(tmp_path / "runs.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    assert [row["run_id"] for row in rows][0] == "old-run" and len(rows) == 2
    assert rows[0]["output_tok_per_s"] == "123.4" and rows[0]["verdict"] == ""
    assert rows[1]["completed"] == "4" and rows[1]["schema_version"] == "1"


@contextmanager
def _tiny_disk(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill ({mounted.stderr.strip()}); needs root")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(disk: Path, leave_bytes: int) -> None:
    """Fill the disk but for about `leave_bytes`."""
    free = subprocess.run(["df", "--output=avail", "-B1", str(disk)], capture_output=True,
                          text=True, check=True).stdout.split()[-1]
    (disk / "filler").write_bytes(b"\0" * max(int(free) - leave_bytes, 0))


def _one_error_exit_2(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "error: " in line]
    assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]


def test_a_full_disk_at_the_start_is_one_error_line(engine_url: str, tmp_path: Path):
    with _tiny_disk(tmp_path / "disk", "64k") as disk:
        (disk / "runs.csv").write_text("run_id\n")
        _fill(disk, 0)
        result = run_locust("--host", engine_url, "--out", str(disk), *SMALL_RUN)
        _one_error_exit_2(result, "cannot write the run's files")
        assert (disk / "runs.csv").read_text() == "run_id\n"


def test_a_disk_that_fills_during_the_run_keeps_what_was_written(engine_url: str, tmp_path: Path):
    with _tiny_disk(tmp_path / "disk", "256k") as disk:
        old_row = "run_id,engine\nkept,vllm-cpu\n"
        (disk / "runs.csv").write_text(old_row)
        _fill(disk, 12 * 1024)  # room for run.json and a few request lines, not for 64 of them
        result = run_locust("--host", engine_url, "--out", str(disk), "--users", "4",
                            "--requests", "64", "--max-tokens", "64", "--ignore-eos",
                            "--telemetry-interval", "0")
        assert result.returncode == 2, result.stderr[-2000:]
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        errors = [line for line in result.stderr.splitlines() if "error: " in line]
        # one line when the writing fails, one at the end saying what was and was not saved
        assert len(errors) == 2, result.stderr[-2000:]
        assert "requests.jsonl failed (No space left on device)" in errors[0]
        assert "could not be saved (No space left on device); runs.csv is as it was" in errors[1]
        assert "requests 64/64 ok" in result.stderr  # every request measured, summary printed
        assert (disk / "runs.csv").read_text() == old_row  # untouched, not torn
        lines = next((disk / "runs").glob("*/requests.jsonl")).read_text().splitlines()
        assert 0 < len(lines) < 64
