"""python -m loadtest.report: its sections are heats, on kept evidence from real races, on
hand-made rows for single rules, and on real runs of the embedded engine."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import pandas as pd
import pytest
from rig_helpers import REPO, markdown_tables, run_locust

from loadtest.report.engine_processes import process_family
from loadtest.report.cli import main
from loadtest.report.runset import MODEL, load_runs

_SHA_A, _SHA_B = "a" * 64, "b" * 64
# A race kept from an H100 (llama.cpp against transformers, 1 to 128 users): transformers named
# the model by its path, llama.cpp by its alias, and only transformers recorded its digest.
_GPU_RACE = REPO / "evidence" / "2026-11-23" / "gpu-race-h100"
# The demo's race of the three CPU engines at 1 and 8 users, every request kept: transformers
# named the model by its path, llama.cpp served the GGUF and recorded no digest, and llama.cpp's
# runs were judged invalid on the busy host.
_CPU_RACE = REPO / "evidence" / "2026-11-25" / "race-cpu"
# llama.cpp on two H200s, one server per GPU against one split across both, at 64 and 256 users;
# each run's per-GPU telemetry kept in runs/RUN_ID/telemetry_summary.json.
_TWO_GPUS = REPO / "evidence" / "2026-11-24" / "gpu" / "two-gpu-layouts-h200"
# One engine under six flag sets at 24-256 users, the request count rising with the users.
_LAYOUTS = REPO / "evidence" / "2026-11-24" / "gpu" / "one-gpu-layouts-h100"


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


def _sections(markdown: str) -> dict[str, str]:
    """The report's level-2 sections by title, each with its text up to the next one."""
    parts = re.split(r"^## ", markdown, flags=re.M)[1:]
    return {part.split("\n", 1)[0]: part.split("\n", 1)[1] for part in parts}


def _heat_rows(markdown: str) -> list[dict[str, str]]:
    """The rows of every heat's table, in the report's order."""
    return [row for title, text in _sections(markdown).items() if title.startswith("Heat: ")
            for row in markdown_tables(text)[0]]


def _evidence(tmp_path: Path, folder: Path) -> Path:
    """A copy of a kept results folder (runs.csv and its runs/ where kept): the report writes
    beside it."""
    results = tmp_path / folder.name
    shutil.copytree(folder, results, ignore=shutil.ignore_patterns("README.md", "*.png"))
    return results


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as file:
        return list(csv.DictReader(file))


def _first_table(markdown: str) -> list[dict[str, str]]:
    """The first table in `markdown` after the frontier by GPU (which leads a report of runs
    with a GPU count: tests/test_report_frontier.py), one dict per row, keyed by the header."""
    markdown = _without_frontier(markdown)
    lines = markdown.split("\n|---")[0].splitlines()[-1:]
    lines += markdown.split("\n|---")[1].split("\n\n")[0].splitlines()[1:]
    header, *rows = [[c.strip() for c in line.strip()[1:-1].split(" | ")] for line in lines]
    return [dict(zip(header, row)) for row in rows]


def _without_frontier(markdown: str) -> str:
    start = markdown.find("Frontier by GPU")
    if start < 0:
        return markdown
    end = min((i for i in (markdown.find("\n## ", start), markdown.find("\nHeat: ", start))
               if i >= 0), default=len(markdown))
    return markdown[:start] + markdown[end + 1:]


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
    assert "±" not in md.split("### Flag effects")[0].split("|---")[1]
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


def test_flag_effects_never_judge_runs_the_rig_marked_invalid(tmp_path: Path):
    """Four GPUs at 512 users: one server's runs were invalid (its API server starved), so its
    3.6x slower is quoted with why, never as a verdict."""
    rows = [_row(f"a{r}", flags="REPLICAS=per-gpu", output_tok_per_s=52000.0 + r, repeat=r)
            for r in (1, 2)]
    rows += [_row(f"b{r}", flags="SHARDS=4", output_tok_per_s=14400.0 + r, repeat=r,
                  verdict="invalid", verdict_reasons="answers_arrived_whole") for r in (1, 2)]
    _write(tmp_path, rows)
    _, md = _report(tmp_path)
    effects = md.split("### Flag effects")[1].split("###")[0]
    assert "x slower" not in effects and "x faster" not in effects
    assert "not judged: options 2 of 2 runs invalid (answers_arrived_whole)" in effects
    assert "0.28x" in effects  # the ratio is still shown, beside why it is not a verdict


def test_each_layout_shows_its_busiest_engine_processes_beside_its_gpus(tmp_path: Path):
    """One server over two GPUs against a replica per GPU, each twice: the split server's API
    server near a full core is named, the replicas' processes of one name counted (x2), the
    spread over repeats given, the busiest API server's column beside them; runs that listed no
    processes add no section."""
    api = "python -m vllm.entrypoints.cli.main"
    split = [[{"name": api, "pid": 1, "cpu_pct": 99.0 + r},
              {"name": "VLLM::Worker_TP0", "pid": 2, "cpu_pct": 98.0},
              {"name": "VLLM::Worker_TP1", "pid": 3, "cpu_pct": 97.0},
              {"name": "VLLM::EngineCore", "pid": 4, "cpu_pct": 40.0}] for r in (0, 1)]
    replicas = [[{"name": api, "pid": 10 * i, "cpu_pct": 60.0 + 10 * i + r,
                  "replica": f"http://127.0.0.1:{9000 + i}"} for i in (1, 2)] for r in (0, 1)]
    rows = [_row(f"s{r}", flags="SHARDS=2", gpu="0,1", repeat=r + 1, users=256,
                 engine_front_end_cpu_max_pct=99.0 + r) for r in (0, 1)]
    rows += [_row(f"p{r}", flags="REPLICAS=per-gpu", gpu="0,1", repeat=r + 1, users=256,
                  engine_front_end_cpu_max_pct=80.0 + r) for r in (0, 1)]
    rows += [_row("old", flags="SHARDS=2", gpu="0,1", users=64)]  # an older run: no list in its run.json
    _write(tmp_path, rows)
    for run_id, listed in [*zip(("s0", "s1"), split), *zip(("p0", "p1"), replicas)]:
        folder = tmp_path / "runs" / run_id
        folder.mkdir(parents=True)
        (folder / "run.json").write_text(json.dumps({"run_id": run_id, "engine_processes": listed}))
    _, md = _report(tmp_path)
    heats = _sections(md)
    assert "busiest processes" not in heats["Heat: mixed-32x32 at 64 users"]
    table = heats["Heat: mixed-32x32 at 256 users"].split("### The engine's busiest processes: CPU")[1]
    assert "spin-waits on its GPU" in table
    cells = {row["options"]: row for row in markdown_tables(table)[0]}
    busiest = "busiest engine processes (% of a core, min-max over repeats)"
    assert cells["`SHARDS=2` gpu 0,1"][busiest] == (
        f"`{api}` 100% (99-100), `VLLM::Worker_TPN` x2 98%, `VLLM::EngineCore` 40%")
    assert cells["`REPLICAS=per-gpu` gpu 0,1"][busiest] == f"`{api}` x2 80% (80-81)"
    assert cells["`REPLICAS=per-gpu` gpu 0,1"]["runs"] == "2"
    front_end = "busiest API server (% of a core)"  # the rows' engine_front_end_cpu_max_pct
    assert cells["`SHARDS=2` gpu 0,1"][front_end] == "100% (99-100)"
    assert cells["`REPLICAS=per-gpu` gpu 0,1"][front_end] == "80% (80-81)"


def test_runs_csvs_of_different_columns_are_one_race(tmp_path: Path):
    """Two engines' runs.csv files, one without a column the other has (vLLM records its
    model's digest, llama.cpp cannot): both engines are in the heat. pandas 3 kept the missing
    text as NaN, the model's key with it, and grouping dropped llama.cpp's runs unsaid."""
    _write(tmp_path / "vllm", [_row("v1", model_sha256=_SHA_A)])
    _write(tmp_path / "llamacpp", [_row("l1", engine="llamacpp-cpu", output_tok_per_s=300.0)])
    _, md = _report(tmp_path)
    [heat] = [title for title in _sections(md) if title.startswith("Heat: ")]
    assert {cell["platform"] for cell in _heat_rows(md)} == {"vllm", "llamacpp-cpu"}, heat
    assert "Not comparable" not in md  # one model: llama.cpp's run takes the digest of its name


def test_different_workloads_at_one_user_count_are_two_heats(tmp_path: Path):
    _write(tmp_path, [_row("r1"), _row("r2", workload_sha256=_SHA_B, workload="story-32x32")])
    _, md = _report(tmp_path)
    heats = [title for title in _sections(md) if title.startswith("Heat: ")]
    assert heats == ["Heat: mixed-32x32 at 4 users", "Heat: story-32x32 at 4 users"]
    assert "Not comparable" not in md  # one model: heats are the only split
    assert not (tmp_path / "report" / "users.png").exists()  # one user count: no curve


def test_models_with_different_digests_are_never_compared(tmp_path: Path):
    _write(tmp_path, [_row("r1", model_sha256=_SHA_A), _row("r2", model_sha256=_SHA_B)])
    _, md = _report(tmp_path)
    assert "**Not comparable as a whole:** these runs served 2 models" in md
    heats = [title for title in _sections(md) if title.startswith("Heat: ")]
    assert heats == ["Heat: mixed-32x32 at 4 users (m (sha256 aaaaaaaaaaaa))",
                     "Heat: mixed-32x32 at 4 users (m (sha256 bbbbbbbbbbbb))"]


def test_saturated_client_is_called_out(tmp_path: Path):
    _write(tmp_path, [_row("r1", client_cpu_max_pct=97.0, warnings="client_cpu_high")])
    _, md = _report(tmp_path)
    assert "**Client saturated** in 1 run(s)" in md and "`r1`" in md
    assert "**97 saturated**" in md


def test_engine_holding_more_than_the_run_sent_is_called_shared(tmp_path: Path):
    _write(tmp_path, [_row("r1", users=8, engine_running_peak=128, engine_waiting_peak=9),
                      _row("r2", users=4, engine_running_peak=4, engine_waiting_peak=1)])
    _, md = _report(tmp_path)
    notes = {row["users"]: row["notes"] for row in _heat_rows(md)}
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
    users = [row["users"] for row in _heat_rows(md)]
    assert users == ["1", "4"]


def test_an_older_in_process_rows_warmup_s_reads_as_engine_warmup_s(tmp_path: Path):
    _write(tmp_path, [_row("inproc", mode="in-process", warmup_s=1.5),
                      _row("timed", warmup_s=30.0, duration_s=120.0)])
    runs = load_runs(tmp_path).set_index("run_id")
    assert runs.loc["inproc", "engine_warmup_s"] == 1.5
    assert pd.isna(runs.loc["inproc", "warmup_s"])  # not a timed run's --warmup-s
    assert runs.loc["timed", "warmup_s"] == 30.0 and pd.isna(runs.loc["timed", "engine_warmup_s"])
    code, _ = _report(tmp_path)
    assert code == 0


# --- kept evidence from real races -------------------------------------------------------------

@pytest.fixture(scope="module")
def gpu_race(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    """The H100 race's copy, its report written once for the tests that read it as it is (a
    report of its heats and plots takes seconds): the folder, the exit code and report.md."""
    results = _evidence(tmp_path_factory.mktemp("gpu-race"), _GPU_RACE)
    return results, *_report(results)


def test_the_sections_of_a_real_race_are_its_heats_with_every_engine_in_each(
        gpu_race: tuple[Path, int, str]):
    results, code, md = gpu_race
    assert code == 0
    rows = _csv(results / "runs.csv")
    expected: dict[str, set[str]] = {}
    for row in rows:
        users = int(row["users"])
        title = f"Heat: {row['workload']} at {users} user{'' if users == 1 else 's'}"
        expected.setdefault(title, set()).add(row["engine"])
    sections = _sections(md)
    heats = {title: text for title, text in sections.items() if title.startswith("Heat: ")}
    assert set(heats) == set(expected)
    for title, text in heats.items():
        assert {row["platform"] for row in markdown_tables(text)[0]} == expected[title], title
    users_in_order = [int(title.split(" at ")[1].split()[0]) for title in heats]
    assert users_in_order == sorted(users_in_order)
    assert "Not comparable" not in md and "Group" not in md
    assert list(sections)[:3] == ["Frontier by GPU: throughput per GPU against speed per user",
                                  "Race: the fastest engine at each user count",
                                  "Across user counts"]


def test_the_demo_race_of_three_cpu_engines_has_every_engine_in_each_heat(tmp_path: Path):
    results = _evidence(tmp_path, _CPU_RACE)
    runs = load_runs(results)
    assert set(runs["model"]) == {"tiny-llama", "/work/main/models/tiny-llama"}
    assert set(runs[runs["engine"] == "llamacpp-cpu"]["model_sha256"]) == {""}
    assert runs[MODEL].nunique() == 1  # one model, though three engines named it two ways
    code, md = _report(results, "--race")
    assert code == 0 and "Not comparable" not in md
    sections = _sections(md)
    for title in ("Heat: mixed-56x64 at 1 user", "Heat: mixed-96x64 at 8 users"):
        rows = {row["platform"]: row for row in markdown_tables(sections[title])[0]}
        assert set(rows) == {"vllm-cpu", "llamacpp-cpu", "transformers"}, title
        assert rows["llamacpp-cpu"]["notes"].startswith("**1 of 1 runs invalid** (client_overloaded)")
        assert "workload `mixed-" in sections[title] and "from source `prompts`" in sections[title]
    race = markdown_tables(sections["Race: the fastest engine at each user count"])[0]
    assert {row["platform"] for row in race} == {"vllm-cpu", "transformers"}  # invalid: apart
    pngs = {p.name for p in (results / "report").glob("*.png")}
    assert pngs == {"race.png", "users.png", "frontier.png", "distributions-h1.png",
                    "distributions-h2.png"}  # the curves once, each heat its distributions
    assert len(list((results / "report" / "timelines").glob("*.png"))) == 3


def test_engines_serving_one_model_under_two_names_share_its_heats(
        gpu_race: tuple[Path, int, str]):
    results, _, md = gpu_race
    runs = load_runs(results)
    names = set(runs["model"])
    assert names == {"tinyllama-1.1b", "/work/main/models/tinyllama-1.1b"}
    digests = set(runs["model_sha256"]) - {""}
    assert len(digests) == 1 and set(runs[MODEL]) == digests  # the alias takes the digest
    heat = _sections(md)["Heat: mixed-64x128 at 8 users"]
    assert [row["platform"] for row in markdown_tables(heat)[0]] == ["llamacpp", "transformers"]


def test_the_curves_across_user_counts_are_drawn_once(gpu_race: tuple[Path, int, str]):
    results, _, _ = gpu_race
    pngs = sorted(p.name for p in (results / "report").glob("*.png"))
    assert pngs == ["frontier-gpu-1.png", "frontier.png", "race.png",  # no requests.jsonl kept
                    "users.png"]
    html = (results / "report" / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 4  # and the frontier by GPU


def test_a_race_at_one_user_count_has_no_against_users_plot(tmp_path: Path):
    results = _evidence(tmp_path, _GPU_RACE)
    assert main([str(results), "--where", "users=32"]) == 0
    md = (results / "report" / "report.md").read_text()
    assert "## Race" in md and "## Across user counts" not in md
    assert [p.name for p in (results / "report").glob("*.png")] == ["frontier-gpu-1.png"]
    heats = [title for title in _sections(md) if title.startswith("Heat: ")]
    assert heats == ["Heat: mixed-128x128 at 32 users", "Heat: mixed-256x128 at 32 users"]


def test_each_heat_shows_each_gpu_and_the_gpus_plot_is_drawn_once(tmp_path: Path):
    results = _evidence(tmp_path, _TWO_GPUS)
    _, md = _report(results)
    heats = {title: text for title, text in _sections(md).items() if title.startswith("Heat: ")}
    assert len(heats) == 2
    for title, text in heats.items():
        gpus = markdown_tables(text.split("### Each GPU: utilization and memory")[1])[0]
        assert len(gpus) == 2, title  # one row per layout in the heat
    assert md.count("![utilization and peak memory of each GPU against users]") == 1
    assert [p.name for p in (results / "report").glob("gpus*.png")] == ["gpus.png"]


def test_a_flags_sweep_is_reported_by_heats_with_flag_effects_in_each(tmp_path: Path):
    results = _evidence(tmp_path, _LAYOUTS)
    _, md = _report(results)
    rows = _csv(results / "runs.csv")
    heats = {title: text for title, text in _sections(md).items() if title.startswith("Heat: ")}
    assert len(heats) == len({(r["workload_sha256"], r["users"]) for r in rows})
    flag_sets = {r["flags"] for r in rows}
    for title, text in heats.items():
        assert len(markdown_tables(text)[0]) == len(flag_sets), title  # every configuration, each heat
        assert "### Flag effects" in text
    assert "## Race" not in md  # one engine: no race unless asked
    assert (results / "report" / "users.png").exists()


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


@pytest.mark.engine
def test_real_report_tables_match_runs_csv(real_results: Path):
    out = real_results / "rep"
    done = subprocess.run([sys.executable, "-m", "loadtest.report", str(real_results), "--out",
                           str(out)], capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    md = (out / "report.md").read_text()
    assert _first_table(done.stdout) == _first_table(md)  # stdout prints the report's table
    rows = _csv(real_results / "runs.csv")
    assert len(rows) == 5
    one = next(r for r in rows if r["flags"] == "--max-num-seqs=2")  # a one-repeat cell
    table = {(r["options"], r["users"]): r for r in _heat_rows(md)}
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
    # the curves once; each heat (1 and 4 users) its distributions
    assert names == {"users.png", "frontier.png", "distributions-h1.png", "distributions-h2.png"}
    timelines = list((out / "timelines").glob("*.png"))
    assert len(timelines) == 2  # one per configuration
    for path in [*out.glob("*.png"), *timelines]:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert matplotlib.image.imread(path).shape[0] > 100
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 6
    assert not re.search(r'src="(?!data:)', html)  # nothing outside the one file


@pytest.mark.engine
def test_real_runs_carry_engine_telemetry(real_results: Path):
    rows = _csv(real_results / "runs.csv")
    assert {r["telemetry_engine"] for r in rows} == {"sampled"}
    assert {r["telemetry_gpu"] for r in rows} <= {"absent", "sampled"}
    for row in rows:
        assert 0 <= float(row["engine_running_peak"]) <= int(row["users"]) + 1
        assert 0 <= float(row["engine_kv_cache_peak_pct"]) <= 100
    timeline = next(real_results.glob("runs/*/telemetry.jsonl")).read_text()
    assert '"source":"engine"' in timeline


@pytest.mark.parametrize("name, family", [
    ("VLLM::Worker_TP1", "VLLM::Worker_TPN"), ("VLLM::APIServer_0", "VLLM::APIServer_N"),
    ("VLLM::EngineCore_DP3", "VLLM::EngineCore_DPN"), ("VLLM::EngineCore", "VLLM::EngineCore"),
    ("python3", "python3"), ("python3 -m vllm.entrypoints.cli.main", "python3 -m vllm.entrypoints.cli.main"),
    ("llama-server", "llama-server")])
def test_numbered_sibling_processes_are_one_family(name: str, family: str):
    assert process_family(name) == family
