"""The frontier by GPU, --target and cost per million tokens, on the GPU evidence's runs.csv."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadtest.report.cost import GpuPrices, gpu_prices_file
from loadtest.report.frontier import frontier_cells, gpu_count, measure_runs, target_lines
from loadtest.report.options import shown_options
from loadtest.report.runset import load_runs
from loadtest.report.target import METRICS, parse_target
from loadtest.toolkit.types import BadValue

REPO = Path(__file__).resolve().parents[1]
TWO_GPUS = REPO / "evidence/2026-11-26/gpu-layouts/vllm-8b-2xh200"  # SHARDS=2, REPLICAS=per-gpu
FOUR_GPUS = REPO / "evidence/2026-11-27/gpu-layouts/vllm-8b-4xh200-m"
ONE_INVALID = REPO / "evidence/2026-11-26/gpu-layouts/vllm-8b-4xh200-i-client1"  # 4 GPUs
ONE_GPU_RACE = REPO / "evidence/2026-11-26/gpu-engines/race-8b-h100"  # no --gpu: telemetry's 1
TARGET = "ttft_p99_ms<=2000,tok_s_per_user>=30"


def _report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadtest.report", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=300)


def test_gpu_count_comes_from_the_gpu_indices_else_a_one_gpu_hosts_telemetry():
    runs = load_runs(FOUR_GPUS)
    assert {gpu_count(run)[0] for _, run in runs.iterrows()} == {4}
    race = load_runs(ONE_GPU_RACE)
    assert set(race["gpu"]) == {""}
    assert {gpu_count(run)[0] for _, run in race.iterrows()} == {1}
    several = race.iloc[0].copy()
    several["gpu_count"] = 8
    count, why = gpu_count(several)
    assert count is None and "8 GPUs visible" in why


def test_per_gpu_and_per_user_rates_are_the_rows_own_numbers_divided():
    runs = load_runs(TWO_GPUS)
    measured = measure_runs(runs, None)
    first = measured.iloc[0]
    assert first["gpus"] == 2
    assert first["tok_s_per_gpu"] == pytest.approx(runs.iloc[0]["output_tok_per_s"] / 2)
    assert first["tok_s_per_user"] == pytest.approx(1000 / runs.iloc[0]["tpot_mean_ms"])
    assert first["kwh_per_m_tokens"] == pytest.approx(runs.iloc[0]["gpu_j_per_output_token"] / 3.6)
    assert first["no_usd"] == "no GPU-hour price given"


def test_the_frontier_keeps_only_cells_no_other_beats_on_both():
    cells = frontier_cells(measure_runs(load_runs(TWO_GPUS), None))
    for _, cell in cells.iterrows():
        beaten = ((cells["tok_s_per_user"] >= cell["tok_s_per_user"])
                  & (cells["tok_s_per_gpu"] >= cell["tok_s_per_gpu"])
                  & ((cells["tok_s_per_user"] > cell["tok_s_per_user"])
                     | (cells["tok_s_per_gpu"] > cell["tok_s_per_gpu"]))).any()
        assert cell["on_frontier"] == (not beaten)
    assert cells["on_frontier"].sum() >= 1 and not cells["on_frontier"].all()


def test_invalid_runs_are_left_out_and_named():
    measured = measure_runs(load_runs(FOUR_GPUS), None)
    invalid = measured[measured["verdict"] == "invalid"]
    assert not invalid.empty
    assert invalid["left_out"].str.startswith("invalid (").all()
    cells = frontier_cells(measured)
    placed = {i for ids in cells["run_ids"] for i in ids.split(";")}
    assert placed.isdisjoint(invalid["run_id"])


def test_a_target_names_the_most_per_gpu_cell_met_in_every_repeat():
    measured = measure_runs(load_runs(TWO_GPUS), GpuPrices(flat=2.5))
    cells = frontier_cells(measured)
    lines, pick = target_lines(measured, cells, parse_target(TARGET), "here",
                               shown_options(cells["flags"]))
    repeats = measured[measured["run_id"].isin(pick["run_ids"].split(";"))]
    assert (repeats["ttft_p99_ms"] <= 2000).all() and (repeats["tok_s_per_user"] >= 30).all()
    assert pick["tok_s_per_gpu"] == cells["tok_s_per_gpu"].max()
    assert "REPLICAS=per-gpu gpu 0,1 at 256 users" in lines[0] and "per million" in lines[0]


def test_a_target_none_meets_says_which_bound_each_missed():
    measured = measure_runs(load_runs(TWO_GPUS), None)
    cells = frontier_cells(measured)
    lines, pick = target_lines(measured, cells, parse_target("ttft_p99_ms<=1"), "here",
                               shown_options(cells["flags"]), every_miss=True)
    assert pick is None and "no configuration meets it" in lines[0]
    assert len(lines) == 1 + len(cells)
    assert all("missed ttft_p99_ms<=1 (worst repeat" in line for line in lines[1:])


def test_prices_by_gpu_name_take_the_longest_name_the_gpu_holds(tmp_path: Path):
    yaml_file = tmp_path / "prices.yaml"
    yaml_file.write_text("H200: 3.5\nNVIDIA H100 80GB HBM3: 2.0\nH100: 9\n")
    prices = gpu_prices_file(str(yaml_file))
    assert prices.hourly(["NVIDIA H200", "NVIDIA H200"], 2) == (7.0, "")
    assert prices.hourly(["NVIDIA H100 80GB HBM3"], 1) == (2.0, "")
    assert prices.hourly(["NVIDIA A100"], 1)[0] is None
    csv_file = tmp_path / "prices.csv"
    csv_file.write_text("gpu,usd_per_hour\nH200,3.5\n")
    assert gpu_prices_file(str(csv_file)).hourly(["NVIDIA H200"], 1) == (3.5, "")
    measured = measure_runs(load_runs(TWO_GPUS), prices)
    assert measured["usd_per_m_tokens"].notna().all()


def test_a_run_without_gpu_count_or_energy_says_which_figure_it_lacks():
    runs = load_runs(TWO_GPUS).iloc[:1].copy()
    runs["gpu"], runs["gpu_count"], runs["gpu_j_per_output_token"] = "", float("nan"), float("nan")
    measured = measure_runs(runs, GpuPrices(flat=2.5))
    assert measured.iloc[0]["left_out"].startswith("GPU count unknown")
    assert measured.iloc[0]["no_usd"].startswith("GPU count unknown")
    assert measured.iloc[0]["no_kwh"].startswith("no GPU energy")


def test_rig_report_frontier_prints_the_frontier_and_the_targets_pick(tmp_path: Path):
    results = tmp_path / "results"
    for folder in (TWO_GPUS, ONE_INVALID):  # small: the whole report is written too
        shutil.copytree(folder, results / folder.name)
    done = _report(str(results), "--out", str(tmp_path / "report"), "--frontier",
                   "--target", TARGET, "--gpu-hour-price", "2.50")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("Frontier by GPU: llama3-8b")
    assert "| tok/s per user | tok/s per GPU | TTFT p99 (ms) | $/M output tokens |" in done.stdout
    assert "Runs left out of the frontier" in done.stdout
    assert "invalid (client_overloaded)" in done.stdout
    assert f"target {TARGET} in llama3-8b" in done.stdout
    assert "Heat:" not in done.stdout
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Frontier by GPU" in html and 'alt="output tok/s per GPU' in html
    assert list((tmp_path / "report").glob("frontier-gpu-*.png"))


_WORD = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_PLAIN = _WORD.filter(lambda t: not set(t) & set("<>,"))
_NOT_NUMBER = _PLAIN.filter(lambda t: not t.strip() or not set(t.strip()) <= set("0123456789.eE+-"))
_BAD_TARGETS = st.one_of(
    st.just(""), st.just(","), _PLAIN,  # no bound at all
    st.tuples(_PLAIN.filter(lambda t: t.strip() not in METRICS), st.sampled_from(["<=", ">"]),
              st.integers().map(str)).map("".join),  # no such metric
    st.tuples(st.sampled_from(sorted(METRICS)), st.sampled_from(["<=", ">="]),
              st.one_of(_NOT_NUMBER, st.sampled_from(["nan", "inf", "-inf", "1e999", "1_000"])))
      .map("".join),  # no finite number
    st.tuples(st.sampled_from(sorted(METRICS)), st.sampled_from(["=", "=>", "<<", "=<", "!="]),
              st.integers().map(str)).map("".join),  # no such comparison
    st.sampled_from([TARGET + ",", "," + TARGET, TARGET.replace(",", ",,")]),
)


@settings(max_examples=60, deadline=None, database=None)
@given(value=_BAD_TARGETS)
def test_every_malformed_target_is_refused_in_one_line(value: str):
    try:
        parse_target(value)
    except BadValue as exc:
        assert "\n" not in str(exc)
    else:
        pytest.fail(f"{value!r} was taken as a target")


@settings(max_examples=4, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_BAD_TARGETS)
def test_the_command_refuses_a_bad_target_with_one_error_line(value: str, tmp_path: Path):
    done = _report(str(TWO_GPUS), "--out", str(tmp_path / "r"), f"--target={value}")
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and len(errors) == 1 and "--target" in errors[0], done.stderr
    assert "Traceback" not in done.stderr


@settings(max_examples=20, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.one_of(
    st.sampled_from(["", "- a list\n", "H200: free\n", "H200: -1\n", "H200: .nan\n", ": 3\n",
                     "H200: true\n", "{{{\n", "H200: 0\n"]),
    st.text(max_size=30).filter(lambda t: ":" not in t)))
def test_a_bad_prices_file_is_refused_in_one_line(content: str, tmp_path: Path):
    path = tmp_path / "prices.yaml"
    path.write_text(content)
    with pytest.raises(BadValue) as refused:
        gpu_prices_file(str(path))
    assert "\n" not in str(refused.value)


def test_a_dollar_target_without_a_price_is_refused(tmp_path: Path):
    done = _report(str(TWO_GPUS), "--out", str(tmp_path / "r"), "--target",
                   "usd_per_m_tokens<=0.1")
    assert done.returncode == 2 and done.stderr.startswith("error: --target usd_per_m_tokens")
