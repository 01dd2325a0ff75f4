"""transformers serve --continuous-batching as a local engine, driven by the rig as users run it.

Starts the real server (servers/transformers.py, from .venv-transformers) on a free port,
once for this module; skipped with the reason when scripts/install.sh has not made its venv.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from rig_helpers import free_port, run_locust

from loadtest.local_engine import LocalEngine
from loadtest.client.probe import probe_engine
from servers.local import LOCAL


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEngine]:
    why = LOCAL["transformers"].missing()
    if why:
        pytest.skip(why)
    log = tmp_path_factory.mktemp("transformers") / "engine.log"
    with LocalEngine(port=free_port(), log_path=log, engine="transformers") as started:
        yield started


def test_probe_reads_the_pinned_model_from_the_servers_refusal(engine: LocalEngine) -> None:
    info = probe_engine(engine.url, "completions", {}, pinned_model=True)
    assert info.model == engine.model_name == str(Path(engine.model_name).resolve())


def test_rig_gets_exactly_max_tokens_from_every_request(engine: LocalEngine, tmp_path: Path) -> None:
    run = run_locust("--engine", "transformers", "--host", engine.url, "--users", "8",
                     "--requests", "32", "--max-tokens", "32", "--ignore-eos",
                     "--out", str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    with open(tmp_path / "runs.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert (row["completed"], row["failed"], row["model"]) == ("32", "0", engine.model_name)
    assert row["output_tokens_source"] == "usage"  # the server's own count, in its last chunk
    (records,) = list(tmp_path.rglob("requests.jsonl"))
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert [r["output_tokens"] for r in rows] == [32] * 32
    assert {r["finish_reason"] for r in rows} == {"length"}
    assert "uneven_output_lengths" not in row["warnings"]
