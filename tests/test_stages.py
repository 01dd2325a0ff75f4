"""Staged load (issue 25, item 2): the stages file's parsing and refusals, the shape's ticks, the
open-loop stages' schedule, `rig run`'s one-line refusals, and a real staged run on llama.cpp."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from loadtest.client.shape import StagesShape
from loadtest.client.stages import Stage, StageError, load_stages, parse_stages, stage_bounds, stage_offsets_ns
from loadtest.local_engine import LocalEngine
from rig_helpers import run_locust, running_pacer
from servers.local import LOCAL
from test_cli import BY_NAME, check  # rig run's checks, in-process

RAMP_STEP_SPIKE = """
stages:
  - {users: 4, duration: 30s}
  - {users: 32, duration: 2m, spawn_rate: 0.5, name: ramp}
  - {users: 128, duration: 20, name: spike}
  - {users: 8, duration: 1m}
"""


def test_a_ramp_a_step_and_a_spike():
    stages = parse_stages(yaml.safe_load(RAMP_STEP_SPIKE))
    assert stages == [Stage("stage 1", 4, 30.0), Stage("ramp", 32, 120.0, 0.5),
                      Stage("spike", 128, 20.0), Stage("stage 4", 8, 60.0)]
    assert stage_bounds(stages) == [(0, 30), (30, 150), (150, 170), (170, 230)]


def test_the_shape_holds_each_stage_then_the_last_until_the_run_is_done():
    finished = False
    shape = StagesShape(parse_stages(yaml.safe_load(RAMP_STEP_SPIKE)), lambda: finished, users=1)
    assert shape.tick_at(0) == (4, 4.0)  # no spawn rate: all at once
    assert shape.tick_at(29.9) == (4, 4.0)
    assert shape.tick_at(30) == (32, 0.5)
    assert shape.tick_at(160) == (128, 96.0)
    assert shape.tick_at(171) == (8, 120.0)
    assert shape.tick_at(10_000) == (8, 120.0)  # past the end: held while requests finish
    assert shape.tick() == (4, 4.0)
    finished = True
    assert shape.tick() is None  # then Locust quits


def test_rate_stages_draw_their_schedule_before_the_run():
    stages = parse_stages([{"rate": 2, "duration": 5, "arrival": "constant"},
                           {"rate": 10, "duration": "1s", "arrival": "constant"},
                           {"rate": 50, "duration": 20}])
    offsets = stage_offsets_ns(stages)
    assert offsets[:11] == [round(i * 0.5e9) for i in range(10)] + [5_000_000_000]
    assert sum(1 for o in offsets if 5e9 <= o < 6e9) == 10
    poisson = [o for o in offsets if o >= 6e9]
    assert 800 < len(poisson) < 1200 and offsets == sorted(offsets) and max(offsets) < 26e9
    assert stage_offsets_ns(stages) == offsets  # seeded: the same every time
    shape = StagesShape(stages, lambda: False, users=16)
    assert shape.tick_at(3) == (16, 16.0) == shape.tick_at(25)


@pytest.mark.parametrize("document, message", [
    (None, "has no stages"),
    ([], "has no stages"),
    ({"stages": []}, "has no stages"),
    ("users: 4", "must be a list of stages"),
    ([4], "stage 1 must be a mapping"),
    ([{"users": 4}], "stage 1 has no duration"),
    ([{"duration": 4}], "needs users (closed loop) or rate"),
    ([{"users": 4, "rate": 2, "duration": 4}], "needs users (closed loop) or rate"),
    ([{"users": 0, "duration": 4}], "stage 1: users must be a positive integer"),
    ([{"users": -2, "duration": 4}], "stage 1: users must be a positive integer"),
    ([{"users": 2.5, "duration": 4}], "stage 1: users must be a positive integer"),
    ([{"users": True, "duration": 4}], "stage 1: users must be a number"),
    ([{"users": 4, "duration": 0}], "stage 1: duration must be a duration above 0"),
    ([{"users": 4, "duration": "-5s"}], "stage 1: duration must be a duration above 0"),
    ([{"users": 4, "duration": "soon"}], "stage 1: duration must be a duration"),
    ([{"users": 4, "duration": 5, "spawn_rate": 0}], "stage 1: spawn_rate must be above 0"),
    ([{"rate": 0, "duration": 5}], "stage 1: rate must be above 0"),
    ([{"rate": "nan", "duration": 5}], "stage 1: rate must be a finite number"),
    ([{"rate": 2, "duration": 5, "arrival": "gamma"}], "arrival must be one of"),
    ([{"rate": 2, "duration": 5, "spawn_rate": 1}], "spawn_rate starts users"),
    ([{"users": 2, "duration": 5, "arrival": "constant"}], "arrival shapes a rate stage"),
    ([{"users": 2, "duration": 5}, {"rate": 2, "duration": 5}], "mixes users and rate stages"),
    ([{"users": 2, "duration": 5, "ramp": 3}], "unknown keys ramp"),
    ([{"users": 2, "duration": 5, "name": ""}], "name must be text"),
])
def test_a_bad_stage_is_refused_in_one_line(document: object, message: str):
    with pytest.raises(StageError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        parse_stages(document)
    assert "\n" not in str(caught.value)


def test_a_file_that_is_not_yaml_names_its_line(tmp_path: Path):
    path = tmp_path / "stages.yaml"
    path.write_text("- {users: 4, duration: 30\n- [\n")
    with pytest.raises(StageError, match=r"is not YAML at line \d"):
        load_stages(path)
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(StageError, match="is not YAML"):
        load_stages(path)


@pytest.mark.parametrize("text, extra, message", [
    ("", [], "has no stages"),  # an empty file is YAML's None (the one through the process)
    ("stages: []\n", [], "has no stages"),
    ("- {users: 4, duration: [\n", [], "is not YAML"),
    ("- {users: 0, duration: 5}\n", [], "users must be a positive integer"),
    ("- {users: 4, duration: 5}\n", ["--duration", "10"], "drop --duration"),
    ("- {users: 4, duration: 5}\n", ["--warmup-s", "3", "--cooldown-s", "2"], "leaves no window"),
    ("- {users: 4, duration: 5}\n", ["--rate", "2"], "--stages with --rate"),
])
def test_rig_run_refuses_a_bad_stages_file_in_one_line_and_sends_nothing(
        tmp_path: Path, text: str, extra: list[str], message: str,
        monkeypatch: pytest.MonkeyPatch):
    """The first case through the real `rig run`, the rest through its checks in-process."""
    path = tmp_path / "stages.yaml"
    path.write_text(text)
    argv = ["--stages", str(path), "--host", "http://127.0.0.1:9", *extra]
    if not text:
        done = subprocess.run([sys.executable, "-m", "loadtest.cli.main", "run", *argv],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
    else:
        monkeypatch.chdir(tmp_path)
        code, stdout, stderr = check(BY_NAME["run"], argv)
    assert code == 2 and not stdout, stderr
    (line,) = stderr.splitlines()
    assert line.startswith("error: ") and message in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stages.yaml"]


# --- a real staged run --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEngine]:
    why = LOCAL["llamacpp-cpu"].missing()
    if why:
        pytest.skip(why)
    log = tmp_path_factory.mktemp("llamacpp") / "engine.log"
    with LocalEngine(port=18152, log_path=log, engine="llamacpp-cpu") as running:
        yield running


def _peak_in_flight(records: list[dict], start_s: float, end_s: float) -> int:
    """The most requests in flight at once among those sent in [start_s, end_s) from the run's
    first send (requests.jsonl's sent_ns and done_ns: one process's clock)."""
    first = min(r["sent_ns"] for r in records)
    chosen = [r for r in records if start_s <= (r["sent_ns"] - first) / 1e9 < end_s]
    events = sorted([(r["sent_ns"], 1) for r in chosen] + [(r["done_ns"], -1) for r in chosen])
    peak = in_flight = 0
    for _, step in events:  # an end before a send at the same instant: (t, -1) sorts first
        in_flight += step
        peak = max(peak, in_flight)
    return peak


@pytest.mark.engine
def test_a_staged_run_steps_users_up_and_down_and_reports_each_stage(engine: LocalEngine,
                                                                     tmp_path: Path):
    """Users step 1 -> 6 -> 2, judged by how many requests were in flight at once (from the
    per-request records), which does not depend on how fast the engine answers: how many each
    stage sent does (on a fast core one user kept llama.cpp as busy as six, issue 38). Each
    stage's edges are read with a second's margin: Locust asks the shape once a second."""
    stages = tmp_path / "stages.yaml"
    stages.write_text("- {users: 1, duration: 3s, name: one}\n"
                      "- {users: 6, duration: 4s, spawn_rate: 3, name: ramp}\n"
                      "- {users: 2, duration: 3s, name: down}\n")
    result = run_locust("--engine", "llamacpp-cpu", "--host", engine.url, "--max-tokens", "32",
                        "--ignore-eos", "--requests", "8", "--stages", str(stages),
                        "--telemetry-interval", "0", "--out", str(tmp_path / "out"), timeout_s=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    with (tmp_path / "out" / "runs.csv").open(newline="") as file:
        (row,) = list(csv.DictReader(file))
    assert (row["users"], row["stages"], row["duration_s"]) == ("6", "3", "10")
    (run_json,) = (tmp_path / "out" / "runs").glob("*/run.json")
    run = json.loads(run_json.read_text())
    by_name = {s["stage"]: s for s in run["stages"]}
    assert list(by_name) == ["one", "ramp", "down"]
    assert [(s["start_s"], s["end_s"]) for s in run["stages"]] == [(0, 3), (3, 7), (7, 10)]
    assert sum(s["sent"] for s in run["stages"]) == int(row["requests_sent"])
    assert int(row["failed"]) == 0  # users a stage stopped finished their requests first
    records = [json.loads(line) for line in
               (run_json.parent / "requests.jsonl").read_text().splitlines()]
    assert len(records) == int(row["requests_sent"]), (len(records), row["requests_sent"])
    # one user alone in [0, 2) s, six at once in the ramp, two left after the step down
    peaks = {"one": _peak_in_flight(records, 0, 2), "ramp": _peak_in_flight(records, 3, 8),
             "down": _peak_in_flight(records, 8.5, 10)}
    sent = {name: stage["sent"] for name, stage in by_name.items()}
    assert peaks == {"one": 1, "ramp": 6, "down": 2}, \
        f"most requests in flight at once per stage: {peaks}; sent per stage: {sent}"


# --- staged load across worker processes --------------------------------------------------------

def _row_and_records(out: Path) -> tuple[dict[str, str], dict, list[dict]]:
    with (out / "runs.csv").open(newline="") as file:
        (row,) = list(csv.DictReader(file))
    (run_json,) = (out / "runs").glob("*/run.json")
    records = [json.loads(line) for line in
               (run_json.parent / "requests.jsonl").read_text().splitlines()]
    return row, json.loads(run_json.read_text()), records


@pytest.mark.engine  # a master and two workers: several Python processes
def test_stages_across_worker_processes_follow_the_masters_one_shape(tmp_path: Path):
    """The master runs the shape and numbers the sends; Locust spreads each stage's users over
    the two workers. The last stage's one user leaves one worker with none: that worker still
    hears the end (the master's empty hand-out) and the run ends with one row."""
    stages = tmp_path / "stages.yaml"
    stages.write_text("- {users: 2, duration: 3s, name: two}\n"
                      "- {users: 6, duration: 3s, name: six}\n"
                      "- {users: 1, duration: 3s, name: one}\n")
    with running_pacer("--ttft-ms", "50", "--gap-ms", "10", "--tokens", "8") as url:
        result = run_locust("--engine", "vllm", "--model", "pacer", "--host", url,
                            "--max-tokens", "8", "--requests", "8", "--stages", str(stages),
                            "--processes", "2", "--telemetry-interval", "0",
                            "--out", str(tmp_path / "out"), timeout_s=180)
    assert result.returncode == 0, result.stderr[-3000:]
    row, run, records = _row_and_records(tmp_path / "out")
    assert (row["users"], row["stages"], row["duration_s"], row["processes"]) == (
        "6", "3", "9", "2")
    assert int(row["failed"]) == 0 and len(records) == int(row["requests_sent"])
    assert sorted(r["request_id"] for r in records) == list(range(len(records)))  # numbered once
    assert {r["worker"] for r in records} == {0, 1}
    assert [s["stage"] for s in run["stages"]] == ["two", "six", "one"]
    assert sum(s["sent"] for s in run["stages"]) == len(records)
    peaks = {"two": _peak_in_flight(records, 0, 2), "six": _peak_in_flight(records, 4, 5.5),
             "one": _peak_in_flight(records, 7.5, 9)}
    assert peaks == {"two": 2, "six": 6, "one": 1}, peaks
    assert {w["worker"] for w in run["workers"]} == {0, 1}


@pytest.mark.engine
def test_open_loop_stages_across_worker_processes_keep_the_masters_schedule(tmp_path: Path):
    """Each stage's rate, drawn once (the same on every process: the workers' schedules are
    checked against the master's), sent by whichever worker is handed each send."""
    stages = tmp_path / "stages.yaml"
    stages.write_text("- {rate: 5, duration: 3s, arrival: constant, name: slow}\n"
                      "- {rate: 20, duration: 3s, arrival: constant, name: fast}\n")
    with running_pacer("--ttft-ms", "20", "--gap-ms", "5", "--tokens", "4") as url:
        result = run_locust("--engine", "vllm", "--model", "pacer", "--host", url,
                            "--max-tokens", "4", "--requests", "8", "--stages", str(stages),
                            "--users", "8", "--processes", "2", "--telemetry-interval", "0",
                            "--out", str(tmp_path / "out"), timeout_s=180)
    assert result.returncode == 0, result.stderr[-3000:]
    row, run, records = _row_and_records(tmp_path / "out")
    assert len(records) == 15 + 60 and {r["worker"] for r in records} == {0, 1}
    sent = {s["stage"]: s["sent"] for s in run["stages"]}
    assert sent == {"slow": 15, "fast": 60}, sent
    assert float(row["send_lag_p99_ms"]) < 50, row["send_lag_p99_ms"]
    assert "behind_schedule" not in row["verdict_reasons"]
    assert float(row["send_lag_worst_worker_p99_ms"]) < 50


def test_a_constant_stage_sends_its_rate_times_its_duration():
    stages = parse_stages([{"rate": 5, "duration": 2, "arrival": "constant"},
                           {"rate": 20, "duration": 2, "arrival": "constant"},
                           {"rate": 10, "duration": 3, "arrival": "constant"}])
    offsets = stage_offsets_ns(stages)
    assert len(offsets) == 10 + 40 + 30 and len(set(offsets)) == len(offsets)
