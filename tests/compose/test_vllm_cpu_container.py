"""End to end: `docker compose up -d vllm-cpu`, wait for health, drive it with the Locust workload, down.

Needs a Docker engine (bash scripts/docker_setup.sh); skipped with the reason where none answers.
Builds llm-load-rig/vllm-cpu with scripts/build_images.sh if it is missing, and serves
models/tiny-llama. Uses host networking (docker-compose.ci.yml) on 127.0.0.1, port
VLLM_CPU_TEST_PORT (default 8100, away from a vLLM the developer may run on 8000).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import (
    compose,
    ensure_images,
    ensure_tiny_model,
    require_free_port,
    run_locust,
    stream_completion,
    wait_healthy,
)

from servers import translate

PORT = int(os.environ.get("VLLM_CPU_TEST_PORT", "8100"))
PROJECT = "llm-load-rig-test"
# EXTRA_ARGS passes through compose verbatim: eager, no torch.compile warm-up in the container.
SETTINGS = {"HOST": "127.0.0.1", "PORT": str(PORT), "MAX_CONCURRENT_REQUESTS": "8",
            "EXTRA_ARGS": "--enforce-eager"}

pytestmark = pytest.mark.docker


def _compose(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return compose(PROJECT, "VLLM_CPU", SETTINGS, *args, check=check)


@pytest.fixture(scope="module")
def container(docker_client: Any) -> Iterator[Any]:
    """The running, healthy vllm-cpu container (host network, 127.0.0.1:PORT); downed after."""
    require_free_port(PORT)
    ensure_tiny_model()
    ensure_images(docker_client, "vllm-cpu")
    try:
        _compose("up", "-d", "vllm-cpu")
        container = docker_client.containers.get(_compose("ps", "-q", "vllm-cpu").stdout.strip())
        wait_healthy(container, timeout_s=900)
        yield container
    finally:
        _compose("down", "--timeout", "20", check=False)


def test_compose_runs_the_translated_command(container: Any) -> None:
    assert container.attrs["Config"]["Cmd"] == translate("vllm-cpu", SETTINGS)
    assert container.attrs["HostConfig"]["NetworkMode"] == "host"
    mounts = {m["Destination"]: m for m in container.attrs["Mounts"]}
    assert mounts["/models"]["RW"] is False


def test_container_streams_completions(container: Any) -> None:
    events = stream_completion(PORT)
    assert events[-1] == "[DONE]"
    usage = [json.loads(e)["usage"] for e in events[:-1] if json.loads(e).get("usage")]
    assert usage and usage[-1]["completion_tokens"] > 0


def test_locust_fixed_workload_through_the_container(container: Any, tmp_path: Path) -> None:
    row = run_locust(PORT, tmp_path / "results", translate("vllm-cpu", SETTINGS))
    assert int(row["completed"]) == 16 and int(row["failed"]) == 0, row
    assert int(row["output_tokens"]) > 0 and float(row["output_tok_per_s"]) > 0, row
    print(f"\nvllm-cpu container: {row['completed']} requests, {row['output_tokens']} output tokens, "
          f"{float(row['output_tok_per_s']):.1f} tok/s, ttft p50 {float(row['ttft_p50_ms']):.0f} ms")
