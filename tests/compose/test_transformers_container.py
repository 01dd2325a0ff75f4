"""End to end: `docker compose up -d --wait transformers`, then the Locust workload through it, down.

Needs a Docker engine (bash scripts/docker_setup.sh); skipped with the reason where none answers.
Builds llm-load-rig/transformers-cpu with scripts/build_images.sh if it is missing, and serves
models/tiny-llama. Uses host networking (docker-compose.ci.yml) on 127.0.0.1, port
TRANSFORMERS_TEST_PORT (default 8190, away from a local transformers serve on 8090).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import ROOT, compose, ensure_images, ensure_tiny_model, log_excerpt, require_free_port

from loadtest.launch.command import locust_command
from servers import translate

PORT = int(os.environ.get("TRANSFORMERS_TEST_PORT", "8190"))
PROJECT = "llm-load-rig-test-transformers"
SETTINGS = {"HOST": "127.0.0.1", "PORT": str(PORT), "MAX_BATCH_PREFILL_TOKENS": "256"}

pytestmark = pytest.mark.docker


def _compose(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return compose(PROJECT, "TRANSFORMERS", SETTINGS, *args, check=check)


@pytest.fixture(scope="module")
def container(docker_client: Any) -> Iterator[Any]:
    """The transformers container, up and healthy by `docker compose up --wait`; downed after."""
    require_free_port(PORT)
    ensure_tiny_model()
    ensure_images(docker_client, "transformers-cpu")
    try:
        up = _compose("up", "-d", "--wait", "--wait-timeout", "600", "transformers", check=False)
        found = _compose("ps", "-aq", "transformers").stdout.strip()
        if up.returncode != 0:
            logs = log_excerpt(docker_client.containers.get(found)) if found else "(no container)"
            pytest.fail(f"compose up --wait failed: {up.stderr.strip()[-1000:]}\n{logs}")
        yield docker_client.containers.get(found)
    finally:
        _compose("down", "--timeout", "20", check=False)


def test_compose_runs_the_translated_command(container: Any) -> None:
    assert container.attrs["Config"]["Cmd"] == translate("transformers", SETTINGS)
    assert container.attrs["State"]["Health"]["Status"] == "healthy"
    mounts = {m["Destination"]: m for m in container.attrs["Mounts"]}
    assert mounts["/models"]["RW"] is False


def test_locust_gets_exact_lengths_through_the_container(container: Any, tmp_path: Path) -> None:
    out = tmp_path / "results"
    cmd = locust_command(host=f"http://127.0.0.1:{PORT}", users=8, python=sys.executable,
                         rig_options=["--engine", "transformers", "--requests", "16",
                                      "--max-tokens", "32", "--ignore-eos", "--out", str(out),
                                      "--flags", " ".join(translate("transformers", SETTINGS))])
    run = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    with open(out / "runs.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert row["model"] == "/models/tiny-llama", row["model"]  # named by the server's refusal
    assert int(row["completed"]) == 16 and int(row["failed"]) == 0, row
    (records,) = list(out.rglob("requests.jsonl"))
    lengths = [json.loads(line)["output_tokens"] for line in records.read_text().splitlines()]
    assert lengths == [32] * 16, lengths
    print(f"\ntransformers container: {row['completed']} requests, {row['output_tokens']} output tokens, "
          f"{float(row['output_tok_per_s']):.1f} tok/s, ttft p50 {float(row['ttft_p50_ms']):.0f} ms")
