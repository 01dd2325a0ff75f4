"""End to end: `docker compose up -d --wait textgen-cpu`, drive it with the Locust workload, kill it.

text-generation-webui's API (llama.cpp loader) in front of the rig's llama-server, in the image
scripts/build_images.sh builds (built here if missing: about 25 s where .venv-textgen's packages
can be reused, longer where pip must install them). Needs a Docker engine (bash
scripts/docker_setup.sh), the text-generation-webui source and the llama-server and GGUF
(skipped with the reason where one is missing). Host networking (docker-compose.ci.yml) on
127.0.0.1, port TEXTGEN_CPU_TEST_PORT (default 8105; its llama-server takes that port + 5).

Its usage counts re-tokenize the answer (servers/textgen_cpu.py), so the checks here count
requests and records, not exact token totals.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import compose, ensure_images, require_free_port, stream_completion, wait_healthy
from rig_helpers import crash_under_run, run_locust

from servers import translate
from servers.local import LOCAL
from servers.textgen_cpu import INNER_PORT_OFFSET

PORT = int(os.environ.get("TEXTGEN_CPU_TEST_PORT", "8105"))
PROJECT = "llm-load-rig-test-textgen"
SETTINGS = {"HOST": "127.0.0.1", "PORT": str(PORT), "MAX_CONCURRENT_REQUESTS": "8"}

pytestmark = pytest.mark.docker


def _compose(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return compose(PROJECT, "TEXTGEN_CPU", SETTINGS, *args, check=check)


@pytest.fixture(scope="module")
def container(docker_client: Any) -> Iterator[Any]:
    """The running, healthy textgen-cpu container (host network, 127.0.0.1:PORT); downed after."""
    why = LOCAL["textgen-cpu"].missing()
    if why:
        pytest.skip(why)
    require_free_port(PORT)
    require_free_port(PORT + INNER_PORT_OFFSET)
    ensure_images(docker_client, "textgen-cpu")
    try:
        _compose("up", "-d", "--wait", "--wait-timeout", "300", "textgen-cpu")
        container = docker_client.containers.get(_compose("ps", "-q", "textgen-cpu").stdout.strip())
        wait_healthy(container, timeout_s=60)
        yield container
    finally:
        _compose("down", "--timeout", "20", check=False)


def test_compose_runs_the_translated_command(container: Any) -> None:
    assert container.attrs["Config"]["Cmd"] == translate("textgen-cpu", SETTINGS)
    assert container.attrs["HostConfig"]["NetworkMode"] == "host"
    mounts = {m["Destination"]: m for m in container.attrs["Mounts"]}
    assert mounts["/models"]["RW"] is False


def test_container_streams_completions_from_its_llama_server(container: Any) -> None:
    """The stream ends in [DONE] after chunks of choices, and its llama-server generated the
    tokens. Not that the text is non-empty: the random model's greedy answer can hold a stray
    byte, after which text-generation-webui streams no text (seen once in four CI-like runs of
    the same model and code), and which answer it draws can change with the host."""
    before = _predicted_tokens()
    events = stream_completion(PORT)
    assert events[-1] == "[DONE]", events[-3:]
    chunks = [json.loads(e) for e in events[:-1]]
    assert any(chunk.get("choices") for chunk in chunks), events[:3]
    generated = _predicted_tokens() - before
    assert 1 <= generated <= 8, f"its llama-server generated {generated} tokens for max_tokens 8"


def _predicted_tokens() -> int:
    """Tokens its llama-server generated so far, by its own counter (host network: PORT + 5)."""
    url = f"http://127.0.0.1:{PORT + INNER_PORT_OFFSET}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        lines = response.read().decode().splitlines()
    return int(float(next(line.split()[1] for line in lines if line.startswith("llamacpp:tokens_predicted_total"))))


def test_a_rig_run_through_the_container_gets_every_answer_and_max_tokens_generated(container: Any,
                                                                                    tmp_path: Path) -> None:
    before = _predicted_tokens()
    result = run_locust("--engine", "textgen-cpu", "--host", f"http://127.0.0.1:{PORT}", "--users", "8",
                        "--requests", "16", "--max-tokens", "32", "--ignore-eos", "--out", str(tmp_path))
    with (tmp_path / "runs.csv").open(newline="") as file:
        [row] = list(csv.DictReader(file))
    assert (row["completed"], row["failed"]) == ("16", "0"), result.stderr[-2000:]
    assert float(row["output_tok_per_s"]) > 0, row
    # Its usage re-tokenizes the answer; its llama-server's own count is exact: 32 tokens each.
    assert _predicted_tokens() - before == 16 * 32


def test_docker_kill_mid_run_is_recorded_and_leaves_no_container(container: Any, tmp_path: Path) -> None:
    """`docker kill` while the rig is mid-run (last in this module: it ends the container): every
    request has one record, a whole answer or a failure with its reason, the row counts them,
    and the container (its API and its llama-server) is not running afterwards."""
    out = tmp_path / "out"
    log = crash_under_run(f"http://127.0.0.1:{PORT}", out, container.kill, "--engine", "textgen-cpu",
                          requests=60, max_tokens=64)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(r["request_id"] for r in records) == list(range(60))
    failed = [r for r in records if r["error_kind"] is not None]
    assert failed and {r["error_kind"] for r in failed} <= {"truncated", "connect"}, failed[:3]
    with (out / "runs.csv").open(newline="") as file:
        [row] = list(csv.DictReader(file))
    assert (int(row["completed"]), int(row["failed"])) == (60 - len(failed), len(failed))
    assert row["verdict"] == "invalid" and "failed_requests" in row["verdict_reasons"]
    container.reload()
    assert container.status == "exited", container.status
