"""Time-bounded runs (issue 25, item 1): the window and timeslice figures, computed from records
with known stamps, the options' checks, and a real --duration run on llama.cpp (engine tier)."""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.client.arrivals import OpenLoop, send_offsets_ns
from loadtest.client.options import ConfigError
from loadtest.client.timing import DEFAULT_TIMESLICE_S, Timing, timing_from_options
from loadtest.local_engine import LocalEngine
from loadtest.results import window
from loadtest.results.record import RequestRecord
from loadtest.launch.command import locust_command
from rig_helpers import REPO, run_locust
from servers.local import LOCAL

S = 1_000_000_000  # ns per second
ORIGIN = 10 * S


def record(i: int, sent_s: float, ttft_s: float, gaps_s: list[float], tokens: int | None = None,
           error: str | None = None) -> RequestRecord:
    """A request sent sent_s after ORIGIN, its first chunk ttft_s later, then a chunk per gap."""
    sent = ORIGIN + round(sent_s * S)
    first = sent + round(ttft_s * S)
    gaps = [round(g * S) for g in gaps_s]
    return RequestRecord(i, f"p{i}", 0.0, sent, first_chunk_ns=first, done_ns=first + sum(gaps),
                         chunk_gaps_ns=gaps, output_chunks=len(gaps) + 1,
                         output_tokens=len(gaps) + 1 if tokens is None else tokens,
                         error_kind=error)


def frames(records: list[RequestRecord]):
    return window.requests_frame(records, ORIGIN), window.chunks_frame(records, ORIGIN)


def test_a_request_counts_where_it_was_sent_and_its_tokens_where_they_arrived():
    # sent at 0.5 s, chunks at 1.5, 2.5, 3.5 s (4 tokens: 4/3 per chunk), done at 3.5 s
    records = [record(0, 0.5, 1.0, [1.0, 1.0], tokens=4)]
    requests, chunks = frames(records)
    first = window.interval_figures(requests, chunks, 0.0, 2.0)
    second = window.interval_figures(requests, chunks, 2.0, 4.0)
    assert (first["sent"], first["completed"], second["sent"], second["completed"]) == (1, 0, 0, 1)
    assert first["output_tok_per_s"] == pytest.approx(4 / 3 / 2)
    assert second["output_tok_per_s"] == pytest.approx(8 / 3 / 2)
    assert first["ttft_p50_ms"] == pytest.approx(1000) and second["ttft_p50_ms"] is None
    assert first["itl_p99_ms"] == pytest.approx(1000) and first["e2e_p50_ms"] == pytest.approx(3000)
    assert second["req_per_s"] == pytest.approx(0.5)


def test_the_window_leaves_out_the_edges():
    # a slow request at the start (warm-up), steady ones in the middle, a slow one in cool-down
    records = [record(0, 0.1, 5.0, [0.5]), *(record(i, 2 + i, 0.1, [0.01]) for i in range(1, 6)),
               record(9, 9.5, 4.0, [0.5])]
    requests, chunks = frames(records)
    columns = window.window_columns(requests, chunks, window.Window(2.0, 8.0))
    assert (columns["window_start_s"], columns["window_end_s"], columns["window_s"]) == (2.0, 8.0, 6.0)
    assert columns["window_sent"] == 5 and columns["window_failed"] == 0
    assert columns["window_ttft_p99_ms"] == pytest.approx(100)
    assert columns["window_completed"] == 6  # 5 steady, and the warm-up request ended at 5.6 s, in the window
    assert columns["window_req_per_s"] == pytest.approx(6 / 6)


def test_a_failed_request_counts_as_failed_and_in_no_latency():
    records = [record(0, 1.0, 0.2, [0.1]), record(1, 1.5, 0.9, [0.1], error="timeout")]
    requests, chunks = frames(records)
    figures = window.interval_figures(requests, chunks, 0.0, 5.0)
    assert (figures["sent"], figures["failed"], figures["completed"]) == (2, 1, 1)
    assert figures["ttft_p99_ms"] == pytest.approx(200)
    assert figures["output_tok_per_s"] == pytest.approx(2 / 5)


def test_timeslices_cover_the_run_and_the_last_one_is_cut_at_its_end():
    records = [record(i, i * 0.7, 0.05, [0.02, 0.02]) for i in range(10)]
    requests, chunks = frames(records)
    slices = window.timeslices(requests, chunks, 2.0, 7.0)
    assert [(s["start_s"], s["end_s"]) for s in slices] == [(0, 2), (2, 4), (4, 6), (6, 7)]
    assert sum(s["sent"] for s in slices) == 10 and sum(s["completed"] for s in slices) == 10


@settings(max_examples=40, deadline=None)
@given(sends=st.lists(st.floats(0, 30, allow_nan=False), min_size=1, max_size=30),
       slice_s=st.floats(0.5, 10), tokens=st.integers(1, 50))
def test_timeslices_add_up_to_the_whole_run(sends: list[float], slice_s: float, tokens: int):
    records = [record(i, t, 0.01, [0.01] * 3, tokens=tokens) for i, t in enumerate(sends)]
    requests, chunks = frames(records)
    end_s = float(requests[["done_s", "sent_s"]].max().max()) + 1e-3
    slices = window.timeslices(requests, chunks, slice_s, end_s)
    assert sum(s["sent"] for s in slices) == len(records)
    assert sum(s["completed"] for s in slices) == len(records)
    total_tokens = sum(s["output_tok_per_s"] * (s["end_s"] - s["start_s"]) for s in slices)
    assert total_tokens == pytest.approx(tokens * len(records), rel=1e-3)


def test_timing_figures_of_a_run_without_records_are_empty():
    assert Timing().figures([], None) == {"columns": {}, "timeslices": []}


# --- the options ------------------------------------------------------------------------------

def options(**given: object) -> argparse.Namespace:
    values = {"duration": None, "warmup_s": 0.0, "cooldown_s": 0.0,
              "timeslice_s": DEFAULT_TIMESLICE_S, "stages": None, "rate": "", "workload": "prompts",
              "dataset_mode": "first-turn", "processes": None}
    return argparse.Namespace(**{**values, **given})


def test_the_fixed_workload_stays_the_default():
    timing = timing_from_options(options())
    assert not timing.timed and timing.columns() == {"timeslice_s": DEFAULT_TIMESLICE_S}


def test_a_duration_and_its_window():
    timing = timing_from_options(options(duration="3m", warmup_s="30", cooldown_s="10"))
    assert (timing.duration_s, timing.warmup_s, timing.cooldown_s) == (180, 30, 10)
    assert timing.columns()["duration_s"] == 180


def test_a_timed_open_loop_run_follows_its_rate_until_the_duration():
    timing = timing_from_options(options(duration="10", rate="5"))
    assert timing.schedule_ns(OpenLoop(5.0, "constant", 0)) == [i * 200_000_000 for i in range(50)]
    poisson = timing.schedule_ns(OpenLoop(50.0, "poisson", 3))
    assert poisson == send_offsets_ns(len(poisson), 50.0, "poisson", 3) and max(poisson) < 10e9
    assert 400 < len(poisson) < 600
    assert timing.columns(poisson)["schedule_s"] == poisson[-1] / 1e9
    assert timing.schedule_ns(None) is None and Timing().schedule_ns(OpenLoop(5.0, "poisson", 0)) is None


@pytest.mark.parametrize("given, message", [
    ({"duration": "10", "warmup_s": 6.0, "cooldown_s": 4.0}, "leaves no window"),
    ({"warmup_s": 5.0}, "give --duration or --stages"),
    ({"cooldown_s": 1.0}, "give --duration or --stages"),
    ({"duration": "0"}, "--duration must be a duration above 0"),
    ({"duration": "-5"}, "--duration must be a duration above 0"),
    ({"warmup_s": "-1", "duration": "10"}, "--warmup-s must be at least 0"),
    ({"timeslice_s": "0"}, "--timeslice-s must be above 0"),
    ({"duration": "10", "workload": "conversation"}, "conversation"),
])
def test_bad_timing_is_one_line(given: dict, message: str):
    with pytest.raises(ConfigError, match=message):
        timing_from_options(options(**given))


def test_a_duration_runs_across_processes():
    """The master numbers the sends and owns the duration (loadtest/client/dispatch.py)."""
    assert timing_from_options(options(duration="10", processes=4)).duration_s == 10


def test_a_refusal_with_forked_workers_leaves_none_behind(tmp_path: Path):
    """--processes forks Locust's workers before the master checks the options: the master's
    refusal ends them too (left to themselves, each waits a minute for its heartbeat)."""
    out = tmp_path / "refused"
    cmd = locust_command(host="http://127.0.0.1:9", users=2,
                         processes=2, rig_options=["--rate", "nope", "--out", str(out)])
    with (tmp_path / "stderr.txt").open("w+") as stderr:
        code = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=stderr, cwd=REPO,
                              timeout=120).returncode
        stderr.seek(0)
        text = stderr.read()
    assert code == 2 and "error: --rate" in text
    assert "Traceback" not in text
    deadline = time.monotonic() + 10  # a terminated worker's own shutdown
    while _processes_naming(str(out)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_naming(str(out))


def _processes_naming(text: str) -> list[int]:
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        if text in " ".join(process.info["cmdline"] or []):
            found.append(process.info["pid"])
    return found


# --- a real run ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEngine]:
    why = LOCAL["llamacpp-cpu"].missing()
    if why:
        pytest.skip(why)
    log = tmp_path_factory.mktemp("llamacpp") / "engine.log"
    with LocalEngine(port=18151, log_path=log, engine="llamacpp-cpu") as running:
        yield running


@pytest.mark.engine
def test_a_duration_run_sends_for_its_time_and_finishes_what_is_in_flight(engine: LocalEngine,
                                                                          tmp_path: Path):
    result = run_locust("--engine", "llamacpp-cpu", "--host", engine.url, "--users", "4",
                        "--max-tokens", "32", "--ignore-eos", "--requests", "8", "--duration", "6",
                        "--warmup-s", "2", "--cooldown-s", "1", "--timeslice-s", "1",
                        "--telemetry-interval", "0", "--out", str(tmp_path), timeout_s=120)
    assert result.returncode == 0, result.stderr[-3000:]
    with (tmp_path / "runs.csv").open(newline="") as file:
        (row,) = list(csv.DictReader(file))
    (run_json,) = (tmp_path / "runs").glob("*/run.json")
    run = json.loads(run_json.read_text())
    lines = (run_json.parent / "requests.jsonl").read_text().splitlines()
    sent = [json.loads(line) for line in lines]
    # more than the cycle of 8 requests, every one answered in full, each send numbered anew
    assert len(sent) == int(row["requests_sent"]) > 8 and int(row["failed"]) == 0
    assert all(r["output_tokens"] == 32 for r in sent)
    assert sorted(r["request_id"] for r in sent) == list(range(len(sent)))
    # sending stopped at 6 s; the run ended when the last answer did, a little after
    assert 6.0 <= float(row["completion_time_s"]) < 6.0 + 5
    assert (float(row["window_start_s"]), float(row["window_end_s"])) == (2.0, 5.0)
    assert 0 < int(row["window_sent"]) < len(sent) and float(row["window_output_tok_per_s"]) > 0
    assert float(row["window_ttft_p99_ms"]) > 0 and float(row["output_tok_per_s"]) > 0
    slices = run["timeslices"]
    assert [s["start_s"] for s in slices[:6]] == [0, 1, 2, 3, 4, 5]
    assert sum(s["sent"] for s in slices) == len(sent)


# --- the report ---------------------------------------------------------------------------------

def test_the_report_plots_the_timeslices_and_tables_the_stages(tmp_path: Path):
    from loadtest.report.timeslices import plot_timeslices, stages_markdown

    records = [record(i, i * 0.5, 0.05, [0.02] * 4) for i in range(40)]
    timing = Timing(duration_s=20.0, warmup_s=4.0, cooldown_s=2.0, timeslice_s=2.0)
    saved = {**timing.columns(), **timing.figures(records, ORIGIN)}
    saved.update(saved.pop("columns"))
    assert saved["window_start_s"] == 4.0 and saved["window_sent"] == 28
    plot_timeslices("a run", saved, tmp_path / "slices.png")
    assert (tmp_path / "slices.png").stat().st_size > 10_000
    table = stages_markdown([{"stage": "ramp", "users": 32, "spawn_rate": 0.5, "rate": None,
                              **window.interval_figures(*frames(records), 0.0, 10.0)}])
    assert "| ramp | 32 users (+0.5/s) | 0-10 | 20 | 0 |" in table
