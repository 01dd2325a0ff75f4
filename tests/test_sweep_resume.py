"""Resuming a sweep: a run that finished just before an interrupt is kept, not run twice.

Seen on a GPU machine: the interrupt came while Locust was exiting after writing its row; the
sweep had not recorded the cell yet, so the resumed sweep ran it again and runs.csv held two runs
for one repeat. The engine and Locust are stand-ins here: the race is in the sweep's bookkeeping.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loadtest.sweep import runner
from loadtest.sweep.launch import RunningEngine
from loadtest.sweep.matrix import parse_matrix

MATRIX: dict[str, Any] = {"name": "late", "workload": {"requests": 8, "max_tokens": 8},
                          "users": [1], "repeats": 1, "warmup_requests": 0,
                          "engines": [{"engine": "vllm-cpu", "launch": "local"}]}


def _no_engine(*_: object) -> RunningEngine:
    return RunningEngine("http://127.0.0.1:9")  # starts and stops nothing


def _interrupted_after_the_row(*_: object) -> None:
    raise KeyboardInterrupt("SIGINT while Locust exits, its row already written")


def _must_not_run(*_: object) -> None:
    raise AssertionError("the resumed sweep ran a cell that had been measured")


def test_a_run_finished_before_the_interrupt_is_kept_and_not_run_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    version = runner.rig_version()
    row = {"run_id": "run-1", "rig_version": version, "failed": "0", "completion_time_s": "2.5",
           "output_tok_per_s": "100.0", "workload_sha256": "w"}
    monkeypatch.setattr(runner, "make_launcher", _no_engine)
    monkeypatch.setattr(runner, "preflight", lambda *_: None)
    monkeypatch.setattr(runner, "print_tables", lambda *_: 0)
    monkeypatch.setattr(runner, "run_ids", lambda *_: {"run-1"})
    monkeypatch.setattr(runner, "find_row", lambda *_: row)
    monkeypatch.setattr(runner, "run", _interrupted_after_the_row)
    matrix = parse_matrix(MATRIX, None)
    assert runner.run_sweep(matrix, tmp_path, kind="flags") == 130
    state = json.loads((tmp_path / "sweeps" / "late" / "sweep.json").read_text())
    [cell] = state["cells"].values()
    assert (cell["status"], cell["run_id"], cell["exit_code"]) == ("ok", "run-1", 0)

    monkeypatch.setattr(runner, "run", _must_not_run)
    assert runner.run_sweep(matrix, tmp_path, kind="flags") == 0
    state = json.loads((tmp_path / "sweeps" / "late" / "sweep.json").read_text())
    [cell] = state["cells"].values()
    assert cell["status"] == "skipped" and cell["reason"] == "measured before by run run-1"


def test_an_interrupted_run_without_a_row_runs_again(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "make_launcher", _no_engine)
    monkeypatch.setattr(runner, "preflight", lambda *_: None)
    monkeypatch.setattr(runner, "find_row", lambda *_: None)
    monkeypatch.setattr(runner, "run", _interrupted_after_the_row)
    assert runner.run_sweep(parse_matrix(MATRIX, None), tmp_path, kind="flags") == 130
    state = json.loads((tmp_path / "sweeps" / "late" / "sweep.json").read_text())
    [cell] = state["cells"].values()
    assert cell["status"] == "pending" and "run_id" not in cell
