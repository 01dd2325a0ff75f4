"""python -m loadtest.report: content of the tables and plots, on hand-made rows and real runs."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import pytest
from rig_helpers import REPO, run_locust

from loadtest.report.build import main

_SHA_A, _SHA_B = "a" * 64, "b" * 64


def _row(run_id: str, **fields: object) -> dict[str, object]:
    row: dict[str, object] = {
        "timestamp": f"2026-01-01T00:00:{len(run_id) % 60:02d}Z", "run_id": run_id,
        "engine": "vllm", "model": "m", "flags": "", "gpu": "0", "users": 4, "requests": 32,
        "completed": 32, "failed": 0, "completion_time_s": 10.0, "output_tokens": 1024,
        "output_tok_per_s": 100.0, "avg_output_tokens": 32.0, "output_tokens_source": "usage",
        "ttft_p50_ms": 10.0, "ttft_p99_ms": 20.0, "itl_p50_ms": 1.0, "itl_p99_ms": 2.0,
        "errors": "", "warnings": "", "workload": "mixed-32x32", "workload_sha256": _SHA_A,
        "repeat": 1, "client_cpu_max_pct": 20.0, "run_dir": "",
    }
    row.update(fields)
    return row


def _write(folder: Path, rows: list[dict[str, object]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with (folder / "runs.csv").open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return folder


def _report(folder: Path, *args: str) -> tuple[int, str]:
    code = main([str(folder), *args])
    return code, (folder / "report" / "report.md").read_text()


def _first_table(markdown: str) -> list[dict[str, str]]:
    """The first table in `markdown`, one dict per row, keyed by the header."""
    lines = markdown.split("\n|---")[0].splitlines()[-1:]
    lines += markdown.split("\n|---")[1].split("\n\n")[0].splitlines()[1:]
    header, *rows = [[c.strip() for c in line.strip()[1:-1].split(" | ")] for line in lines]
    return [dict(zip(header, row)) for row in rows]


def test_missing_folder_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no results folder" in err


def test_empty_folder_says_nothing_to_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("nothing to report:") and out.count("\n") == 1
    assert "nothing to report" in (tmp_path / "report" / "report.md").read_text()


def test_where_that_matches_nothing_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    _write(tmp_path, [_row("r1")])
    assert main([str(tmp_path), "--where", "engine=tgi"]) == 0
    assert "nothing to report: no matching runs" in capsys.readouterr().out


def test_table_is_mean_and_sd_of_repeats(tmp_path: Path):
    _write(tmp_path, [_row("r1", output_tok_per_s=100.0, completion_time_s=10.0, repeat=1,
                           ttft_p99_ms=20.0),
                      _row("r2", output_tok_per_s=120.0, completion_time_s=8.0, repeat=2,
                           ttft_p99_ms=30.0, failed=1, warnings="failed_requests")])
    code, md = _report(tmp_path)
    assert code == 0
    [cell] = _first_table(md)
    assert cell["platform"] == "vllm" and cell["options"] == "(defaults)" and cell["gpu"] == "0"
    assert cell["runs"] == "2"
    assert cell["avg tok/s"] == "110.0 ± 14.1"  # sd of 100 and 120, ddof=1
    assert cell["avg time (s)"] == "9.00 ± 1.41"
    assert cell["TTFT p99 (ms)"] == "25.0"
    assert cell["failed"] == "1/64"
    assert "failed_requests" in cell["notes"] and "unstable" in cell["notes"]
    assert "- `failed_requests`:" in md  # the warning's remedy is spelled out


def test_single_repeat_has_no_spread_and_no_verdict(tmp_path: Path):
    _write(tmp_path, [_row("r1"), _row("r2", flags="--max-num-seqs=8", output_tok_per_s=200.0)])
    _, md = _report(tmp_path)
    assert "±" not in md.split("### Completion")[0].split("|---")[1]
    assert "not significant (one repeat: no spread)" in md
    assert "2.00x" in md  # tok/s ratio against the baseline


def test_flag_effects_against_named_baseline(tmp_path: Path):
    rows = [_row(f"a{r}", flags="--x=1", output_tok_per_s=100.0 + r, repeat=r) for r in (1, 2)]
    rows += [_row(f"b{r}", flags="--x=2", output_tok_per_s=150.0 + r, repeat=r) for r in (1, 2)]
    _write(tmp_path, rows)
    _, md = _report(tmp_path, "--baseline=--x=2")
    effects = md.split("### Flag effects")[1]
    assert "| `--x=1` | `--x=2` |" in effects
    assert "1.49x slower" in effects  # 150.5 / 101.5, well outside the spread


def test_mismatched_workloads_are_separate_groups(tmp_path: Path):
    _write(tmp_path, [_row("r1"), _row("r2", workload_sha256=_SHA_B, workload="story-32x32",
                                      users=8)])
    _, md = _report(tmp_path)
    assert "Not comparable as a whole" in md
    assert "## Group 1:" in md and "## Group 2:" in md
    assert "(sha256 bbbbbbbbbbbb)" in md
    assert (tmp_path / "report" / "users.png").exists()
    assert (tmp_path / "report" / "users-g2.png").exists()


def test_saturated_client_is_called_out(tmp_path: Path):
    _write(tmp_path, [_row("r1", client_cpu_max_pct=97.0, warnings="client_cpu_high")])
    _, md = _report(tmp_path)
    assert "**Client saturated** in 1 run(s)" in md and "`r1`" in md
    assert "**97 saturated**" in md


def test_engine_holding_more_than_the_run_sent_is_called_shared(tmp_path: Path):
    _write(tmp_path, [_row("r1", users=8, engine_running_peak=128, engine_waiting_peak=9),
                      _row("r2", users=4, engine_running_peak=4, engine_waiting_peak=1)])
    _, md = _report(tmp_path)
    notes = {row["users"]: row["notes"] for row in _first_table(md)}
    assert notes["8"].startswith("**engine shared**: it held 137 requests at once")
    assert "shared" not in notes["4"]


def test_gpu_columns_and_a_timeline_with_real_gpu_samples(tmp_path: Path):
    telemetry = (Path(__file__).parent / "data" / "telemetry_h200_matmul.jsonl").read_text()
    start_s = json.loads(telemetry.splitlines()[1])["t"]
    run = tmp_path / "runs" / "g1"
    run.mkdir(parents=True)
    (run / "telemetry.jsonl").write_text(telemetry)
    requests = [{"request_id": i, "prompt_id": "p", "sent_at": start_s + i, "sent_ns": 0,
                 "first_chunk_ns": 500_000_000, "done_ns": 2_000_000_000,
                 "chunk_gaps_ns": [10_000_000] * 3, "ttft_ms": 500.0, "error_kind": None}
                for i in range(8)]
    (run / "requests.jsonl").write_text("\n".join(json.dumps(r) for r in requests) + "\n")
    _write(tmp_path, [_row("g1", telemetry_gpu="sampled", gpu_mem_peak_mib=18009.9,
                           gpu_util_mean_pct=44.5, gpu_j_per_output_token=0.24)])
    _, md = _report(tmp_path)
    [cell] = _first_table(md)
    assert (cell["GPU mem peak (MiB)"], cell["GPU util %"], cell["J/token"]) == \
        ("18,010", "44.5", "0.240")
    path = tmp_path / "report" / "timelines" / "g1.png"
    assert matplotlib.image.imread(path).shape[0] > 500  # requests, engine-less: 2 GPU panels


def test_runs_under_subfolders_are_all_read(tmp_path: Path):
    _write(tmp_path / "u1-r1", [_row("r1", users=1)])
    _write(tmp_path / "u4-r1", [_row("r2", users=4)])
    _, md = _report(tmp_path)
    users = [row["users"] for row in _first_table(md)]
    assert users == ["1", "4"]


# --- real runs of the embedded engine ---------------------------------------------------------

@pytest.fixture(scope="module")
def real_results(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("real")
    cells = [("", 1, 1), ("", 1, 2), ("", 4, 1), ("", 4, 2), ("--max-num-seqs=2", 4, 1)]
    for flags, users, repeat in cells:
        done = run_locust("--host", engine_url, "--users", str(users), "--requests", "12",
                          "--max-tokens", "16", "--ignore-eos", "--out", str(out),
                          "--repeat", str(repeat), f"--flags={flags}")
        assert done.returncode == 0, done.stderr[-2000:]
    return out


def _csv_rows(folder: Path) -> list[dict[str, str]]:
    with (folder / "runs.csv").open(newline="") as file:
        return list(csv.DictReader(file))


@pytest.mark.engine
def test_real_report_tables_match_runs_csv(real_results: Path):
    out = real_results / "rep"
    done = subprocess.run([sys.executable, "-m", "loadtest.report", str(real_results), "--out",
                           str(out)], capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    md = (out / "report.md").read_text()
    assert _first_table(done.stdout) == _first_table(md)  # stdout prints the report's table
    rows = _csv_rows(real_results)
    assert len(rows) == 5
    one = next(r for r in rows if r["flags"] == "--max-num-seqs=2")  # a one-repeat cell
    table = {(r["options"], r["users"]): r for r in _first_table(md)}
    cell = table[("`--max-num-seqs=2`", "4")]
    assert cell["avg tok/s"] == f"{float(one['output_tok_per_s']):,.1f}"
    assert cell["avg time (s)"] == f"{float(one['completion_time_s']):,.2f}"
    assert cell["TTFT p99 (ms)"] == f"{float(one['ttft_p99_ms']):,.1f}"
    assert cell["failed"] == "0/12"
    two = [float(r["output_tok_per_s"]) for r in rows if r["flags"] == "" and r["users"] == "1"]
    assert table[("(defaults)", "1")]["avg tok/s"].startswith(f"{sum(two) / 2:,.1f} ± ")
    assert "### Flag effects" in md and "`--max-num-seqs=2` | (defaults)" in md


@pytest.mark.engine
def test_real_report_plots_are_valid_pngs(real_results: Path):
    out = real_results / "rep-png"
    assert main([str(real_results), "--out", str(out)]) == 0
    names = {p.name for p in out.glob("*.png")}
    assert names == {"users.png", "frontier.png", "distributions.png"}
    timelines = list((out / "timelines").glob("*.png"))
    assert len(timelines) == 2  # one per configuration
    for path in [*out.glob("*.png"), *timelines]:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert matplotlib.image.imread(path).shape[0] > 100
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 5
    assert not re.search(r'src="(?!data:)', html)  # nothing outside the one file


@pytest.mark.engine
def test_real_runs_carry_engine_telemetry(real_results: Path):
    rows = _csv_rows(real_results)
    assert {r["telemetry_engine"] for r in rows} == {"sampled"}
    assert {r["telemetry_gpu"] for r in rows} <= {"absent", "sampled"}
    for row in rows:
        assert 0 <= float(row["engine_running_peak"]) <= int(row["users"]) + 1
        assert 0 <= float(row["engine_kv_cache_peak_pct"]) <= 100
    timeline = next(real_results.glob("runs/*/telemetry.jsonl")).read_text()
    assert '"source":"engine"' in timeline
