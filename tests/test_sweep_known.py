"""`rig sweep flags --until-known`: which configurations run which cells again, on made-up rows
(loadtest/sweep/repeats.py, the rule loadtest/known.py), the sweep's loop and its resume with
stand-ins for the engine and Locust, and the options refused. One engine test at the end runs
the real thing on llama.cpp with tiny settings.
"""

from __future__ import annotations

import csv
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from loadtest.cpus import default_layout
from loadtest.local_engine import LocalEngine
from loadtest.sweep import flags, runner
from loadtest.sweep.cells import again, expand_cells
from loadtest.sweep.launch import RunningEngine
from loadtest.sweep.matrix import parse_matrix
from loadtest.launch import Launched, RunSpec
from loadtest.sweep.repeats import UntilKnown, heat_samples, known_lines, next_pass
from rig_helpers import free_port, requests_lasting
from servers.local import LOCAL

REPO = Path(__file__).resolve().parents[1]
SLOTS = "MAX_CONCURRENT_REQUESTS"


def _matrix(values: list[int], users: list[int], repeats: int = 1, **top: Any) -> dict[str, Any]:
    return {"name": "known", "workload": {"requests": 8, "max_tokens": 8}, "users": users,
            "repeats": repeats, "warmup_requests": 0, **top,
            "engines": [{"engine": "llamacpp-cpu", "launch": "local",
                         "sweep": {SLOTS: values}}]}


def _plan(values: list[int] = [4, 32], users: list[int] = [8], repeats: int = 2):
    matrix = parse_matrix(_matrix(values, users, repeats), None)
    return matrix, expand_cells(matrix, "w")


def _rows(plan, tok_s: dict[tuple[str, int], list[float]]) -> dict[str, dict[str, str]]:
    """Made-up runs.csv rows: the i-th run of (configuration, users) made tok_s[...][i]."""
    rows = {}
    for _, slug, cells in plan:
        for cell in cells:
            figures = tok_s.get((slug, cell.users), [])
            if cell.repeat <= len(figures):
                rows[cell.cell_id] = {"failed": "0", "verdict": "valid",
                                      "output_tok_per_s": str(figures[cell.repeat - 1])}
    return rows


def _next_repeat(matrix):
    return lambda cell: again(cell, matrix.workload, "w")


def test_a_repeat_cell_is_the_cell_a_larger_repeats_would_have_measured():
    """So resume reuses it, and a matrix grown to that many repeats does too."""
    one, three = parse_matrix(_matrix([4], [8], 1), None), parse_matrix(_matrix([4], [8], 3), None)
    [(_, _, [first])] = expand_cells(one, "w")
    [(_, _, cells)] = expand_cells(three, "w")
    second = again(first, one.workload, "w")
    assert [second.cell_id, again(second, one.workload, "w").cell_id] == \
           [c.cell_id for c in cells[1:]]
    assert second.name == "u8-r2" and second.path.endswith("/u8-r2")


def test_the_runs_of_a_heat_are_the_ranked_runs_of_each_configuration():
    matrix, plan = _plan(users=[8, 32])
    (_, four, cells4), (_, thirty_two, _) = plan
    rows = _rows(plan, {(four, 8): [100, 110], (thirty_two, 8): [200, 210],
                        (four, 32): [300, 310], (thirty_two, 32): [400]})
    rows[cells4[1].cell_id] = {**rows[cells4[1].cell_id], "failed": "2"}  # a request failed
    rows[cells4[2].cell_id] = {**rows[cells4[2].cell_id], "verdict": "invalid"}  # too short
    heats = heat_samples(plan, rows)
    assert heats == {("", 8): {four: [100.0], thirty_two: [200.0, 210.0]},
                     ("", 32): {four: [310.0], thirty_two: [400.0]}}


def test_configurations_told_apart_run_nothing_again():
    matrix, plan = _plan(repeats=2)
    (_, four, _), (_, thirty_two, _) = plan
    heats = heat_samples(plan, _rows(plan, {(four, 8): [100, 101], (thirty_two, 8): [200, 202]}))
    assert next_pass(plan, heats, UntilKnown(), _next_repeat(matrix)) == []
    [line] = known_lines(heats, [four, thirty_two], UntilKnown())
    assert line.startswith(f"until known, 8 users: {thirty_two} leads {four} by ")
    assert line.endswith("known after 4 runs (the 95% t-interval on its lead excludes 0)")


def test_the_leader_and_those_it_is_not_ahead_of_run_their_next_repeat():
    """Three configurations: 32 slots leads 16 within the noise, 4 slots far behind: 32 and 16
    run u8-r3 (4 does not), and u32, already known, is not run again."""
    matrix, plan = _plan([4, 16, 32], users=[8, 32])
    slugs = [slug for _, slug, _ in plan]
    four, sixteen, thirty_two = slugs
    heats = heat_samples(plan, _rows(plan, {
        (four, 8): [100, 101], (sixteen, 8): [190, 215], (thirty_two, 8): [200, 210],
        (four, 32): [100, 101], (sixteen, 32): [150, 151], (thirty_two, 32): [300, 301]}))
    legs = next_pass(plan, heats, UntilKnown(), _next_repeat(matrix))
    assert [(slug, [c.name for c in cells]) for _, slug, cells in legs] == \
           [(sixteen, ["u8-r3"]), (thirty_two, ["u8-r3"])]
    lines = known_lines(heats, slugs, UntilKnown(resolve_pct=5))
    assert re.search(r"^until known, 8 users: .* not known after 6 runs \(about \d+ more each "
                     r"would resolve 5\.0%; spread \d+ tok/s\)$", lines[0]), lines[0]
    assert "known after 6 runs" in lines[1] and "not known" not in lines[1]


@pytest.mark.parametrize("max_repeats, runs_next", [(2, []), (3, ["u8-r3"])])
def test_no_cell_runs_past_max_repeats(max_repeats: int, runs_next: list[str]):
    matrix, plan = _plan(repeats=2)
    (_, four, _), (_, thirty_two, _) = plan
    heats = heat_samples(plan, _rows(plan, {(four, 8): [100, 200], (thirty_two, 8): [150, 160]}))
    legs = next_pass(plan, heats, UntilKnown(max_repeats=max_repeats), _next_repeat(matrix))
    assert {tuple(c.name for c in cells) for _, _, cells in legs} == \
           ({tuple(runs_next)} if runs_next else set())


def test_single_runs_repeat_and_have_no_spread_to_judge_by():
    matrix, plan = _plan(repeats=1)
    (_, four, _), (_, thirty_two, _) = plan
    heats = heat_samples(plan, _rows(plan, {(four, 8): [100], (thirty_two, 8): [110]}))
    legs = next_pass(plan, heats, UntilKnown(), _next_repeat(matrix))
    assert [[c.name for c in cells] for _, _, cells in legs] == [["u8-r2"], ["u8-r2"]]
    [line] = known_lines(heats, [four, thirty_two], UntilKnown())
    assert line.endswith("not known after 2 runs (no spread to judge by yet)"), line


def test_a_heat_without_a_ranked_run_says_so():
    _, plan = _plan()
    slugs = [slug for _, slug, _ in plan]
    heats = heat_samples(plan, {})
    assert known_lines(heats, slugs, UntilKnown()) == ["until known, 8 users: no ranked run"]


# --- the sweep's loop, with stand-ins for the engine and Locust -----------------------------

class _Runs:
    """Stand-in Locust: each run of a configuration appends the next of its figures to a made-up
    runs.csv (a list), as the real run appends its row."""

    def __init__(self, figures: dict[str, list[float]]) -> None:
        self.figures = {flag: iter(values) for flag, values in figures.items()}
        self.rows: list[dict[str, str]] = []
        self.ran: list[str] = []

    def run(self, spec: RunSpec, log: Path, _timeout: float) -> Launched:
        flag, users, repeat = spec.flags or "", str(spec.users), str(spec.repeat)
        self.ran.append(f"{flag} u{users}-r{repeat}")
        tok_s = next(self.figures[flag])
        self.rows.append({"run_id": f"run-{len(self.rows)}", "rig_version": runner.rig_version(),
                          "tag": spec.tag or "", "users": users, "repeat": repeat,
                          "failed": "0", "verdict": "valid", "output_tok_per_s": str(tok_s),
                          "completion_time_s": str(round(1000 / tok_s, 3)),
                          "workload_sha256": "w"})
        return Launched(0, "", "", self.rows[-1])

    def find_row(self, _csv: Path, before: set[str], _run_id: str = ""):
        return next((r for r in reversed(self.rows) if r["run_id"] not in before), None)


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Runs]:
    runs = _Runs({f"{SLOTS}=4": [100, 104, 98, 103, 99], f"{SLOTS}=32": [105, 101, 104, 100, 103]})
    monkeypatch.setattr(runner, "make_launcher", lambda *_: RunningEngine("http://127.0.0.1:9"))
    monkeypatch.setattr(runner, "preflight", lambda *_: None)
    monkeypatch.setattr(runner, "_report", lambda *_: None)
    monkeypatch.setattr(runner, "run", runs.run)
    monkeypatch.setattr(runner, "find_row", runs.find_row)
    monkeypatch.setattr(runner, "read_runs", lambda _: list(runs.rows))
    monkeypatch.setattr(runner, "run_ids", lambda _: {r["run_id"] for r in runs.rows})
    yield runs


def test_a_level_heat_repeats_to_the_cap_says_so_and_resumes_without_running_again(
        stand_ins: _Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    matrix = parse_matrix(_matrix([4, 32], [8], 1), None)
    until = UntilKnown(max_repeats=4, resolve_pct=3)
    assert runner.run_sweep(matrix, tmp_path, kind="flags", until=until) == 0
    assert sorted(stand_ins.ran) == sorted(f"{SLOTS}={n} u8-r{r}" for n in (4, 32)
                                           for r in range(1, 5))
    table = capsys.readouterr().out
    line = next(li for li in table.splitlines() if li.startswith("until known, 8 users"))
    assert re.search(r": not known after 8 runs \(about \d+ more each would resolve 3\.0%", line)
    assert re.search(r"^\s+8\s+4\s", table, re.MULTILINE)  # each configuration's row: 4 runs
    folder = tmp_path / "sweeps" / "known"
    with (folder / "known.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert [(r["config"], r["runs"], r["known"]) for r in rows] == \
           [("llamacpp-cpu-parallel4", "4", "False"),
            ("llamacpp-cpu-parallel32", "4", "False")]
    assert json.loads((folder / "sweep.json").read_text())["until_known"]["max_repeats"] == 4

    stand_ins.ran.clear()  # the same command again: every repeat is found, none runs
    assert runner.run_sweep(matrix, tmp_path, kind="flags", until=until) == 0
    assert stand_ins.ran == []
    assert line in capsys.readouterr().out
    assert runner.run_sweep(matrix, tmp_path, kind="flags") == 0  # without: the matrix's cells
    assert stand_ins.ran == [] and not (folder / "known.csv").exists()
    assert "until known" not in capsys.readouterr().out


def test_max_time_stops_the_repeats(stand_ins: _Runs, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch):
    matrix = parse_matrix(_matrix([4, 32], [8], 1), None)
    ticks = itertools.count(0, 100.0)  # every look at the sweep's clock: 100 s later
    monkeypatch.setattr(runner, "time", SimpleNamespace(monotonic=lambda: next(ticks)))
    assert runner.run_sweep(matrix, tmp_path, kind="flags", until=UntilKnown(max_time_s=50)) == 0
    assert len(stand_ins.ran) == 2  # the matrix's runs; no repeat started
    assert "not known after 2 runs" in capsys.readouterr().out


# --- refused: one line, exit 2, nothing started ------------------------------------------------

def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], message: str) -> None:
    with pytest.raises(SystemExit) as info:
        flags.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err


@pytest.mark.parametrize("argv, message", [
    (["--max-repeats", "3"], "--max-repeats goes with --until-known: add it"),
    (["--max-time", "60"], "--max-time goes with --until-known: add it"),
    (["--resolve-pct", "5"], "--resolve-pct goes with --until-known: add it"),
    (["--until-known", "--max-repeats", "0"], "--max-repeats must be a positive integer"),
    (["--until-known", "--max-time", "0"], "--max-time must be a duration above 0"),
    (["--until-known", "--resolve-pct", "0"], "--resolve-pct must be a percent above 0"),
])
def test_caps_without_until_known_or_of_zero_are_refused(argv: list[str], message: str,
                                                          capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path):
    _refused([str(REPO / "sweeps" / "llamacpp-cpu-parallel.yaml"), "--out", str(tmp_path), *argv],
             capsys, message)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("data, argv, message", [
    (_matrix([4], [8]), [], "this matrix has one: nothing to compare"),
    (_matrix([4, 32], [8], repeats=3), ["--max-repeats", "2"],
     "--max-repeats 2 is below the matrix's repeats: 3"),
])
def test_a_matrix_until_known_cannot_work_on_is_refused(data: dict[str, Any], argv: list[str],
                                                        message: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "m.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML
    assert flags.main([str(path), "--out", str(tmp_path / "out"), "--dry-run",
                       "--until-known", *argv]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert not (tmp_path / "out").exists()


# --- the real thing ------------------------------------------------------------------------

@pytest.mark.engine
@pytest.mark.skipif(LOCAL["llamacpp-cpu"].missing() is not None,
                    reason="no local llama.cpp build (scripts/build_llamacpp.sh)")
def test_llamacpp_slots_until_known_end_to_end(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]):
    """Two llama.cpp configurations (2 and 4 slots) at 2 users, one run each in the matrix, at
    most 2 with --until-known: a single run each is never known, so both run u2-r2; the table
    ends with the heat's line, known.csv has each configuration's runs, and the same command
    again runs nothing. The runs must last past short_run's 5 s, so that they rank: their
    request count comes from the speed measured first, on this host (a count that lasted 9 s on
    one 2-core machine ended under 5 s on a faster one: issue 38). Both configurations serve the
    2 users' streams at once, so one probe sizes both (1 slot, tried before, took 1.8 times as
    long as 2: its runs, sized by the faster one, cost the test a probe and some 20 s more)."""
    with LocalEngine(free_port(), extra_args=["--parallel", "2"], engine="llamacpp-cpu",
                     log_path=tmp_path / "probe.log", cpus=default_layout()[0] or None) as engine:
        # 12 s: 2.4 times short_run's 5 s, room for a host whose load falls after the probe
        # (8 s ended under 5 s on a machine busy with other work)
        requests, why = requests_lasting(engine.url, 12, tmp_path / "probe", "--engine",
                                         "llamacpp-cpu", "--prompts", "mixed", "--max-tokens",
                                         "64", "--ignore-eos", users=2)
    measured = f"sized from {why}"
    # no warm-up runs: one before each of the four starts cost a Locust run each (about 3 s);
    # a local engine's warm-up is tests/test_sweep_real.py's, and a cold run is only longer
    data = {"name": "known-e2e", "users": [2], "repeats": 1, "warmup_requests": 0,
            "health_timeout_s": 60, "run_timeout_s": 300,
            "workload": {"prompts": "mixed", "requests": requests, "max_tokens": 64,
                         "ignore_eos": True},
            "engines": [{"engine": "llamacpp-cpu", "launch": "local", "sweep": {SLOTS: [2, 4]}}]}
    path = tmp_path / "m.yaml"
    path.write_text(json.dumps(data))
    argv = [str(path), "--out", str(tmp_path / "out"), "--until-known", "--max-repeats", "2"]
    assert flags.main(argv) == 0, measured
    out = capsys.readouterr().out
    [line] = [li for li in out.splitlines() if li.startswith("until known, 2 users: ")]
    assert re.search(r": (known|not known) after \d runs", line), f"{line} ({measured})"
    folder = tmp_path / "out" / "sweeps" / "known-e2e"
    with (folder / "known.csv").open() as file:
        runs = {r["config"]: int(r["runs"]) for r in csv.DictReader(file)}
    assert set(runs) == {"llamacpp-cpu-parallel2", "llamacpp-cpu-parallel4"}
    assert all(1 <= n <= 2 for n in runs.values()), runs
    assert str(sum(runs.values())) in line, (line, runs)
    cells = json.loads((folder / "sweep.json").read_text())["cells"].values()
    assert sorted((c["config"][-1], c["repeat"], c["status"]) for c in cells) == \
           [("2", 1, "ok"), ("2", 2, "ok"), ("4", 1, "ok"), ("4", 2, "ok")], measured
    assert flags.main(argv) == 0  # resumed: every cell, repeats included, measured before
    again = capsys.readouterr().out
    assert line in again, again
    cells = json.loads((folder / "sweep.json").read_text())["cells"].values()
    assert {c["status"] for c in cells} == {"skipped"}, cells
