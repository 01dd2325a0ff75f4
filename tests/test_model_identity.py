"""Which runs serve one model (loadtest/report/runset.py): engines that name it differently still
race in its heats, and different models never do."""

from __future__ import annotations

import shutil
from pathlib import Path

from rig_helpers import REPO
from loadtest.report.runset import MODEL, load_runs

# llama.cpp serving a GGUF as its stem, text-generation-webui in front of the same file naming it
# by the file (an H100, 2026-11-26)
GGUF_RACE = REPO / "evidence/2026-11-26/gpu-engines/race-128-256-8b-h100"


def test_a_gguf_file_and_its_stem_are_one_model(tmp_path: Path) -> None:
    results = tmp_path / "race"
    shutil.copytree(GGUF_RACE, results)
    runs = load_runs(results)
    assert set(runs["model"]) == {"llama3-8b", "llama3-8b.gguf"}
    assert set(runs[MODEL]) == {"llama3-8b"}


def test_other_names_stay_apart(tmp_path: Path) -> None:
    results = tmp_path / "race"
    shutil.copytree(GGUF_RACE, results)
    runs_csv = results / "runs.csv"
    runs_csv.write_text(runs_csv.read_text().replace("llama3-8b.gguf", "llama3-70b.gguf"))
    assert set(load_runs(results)[MODEL]) == {"llama3-8b", "llama3-70b"}
