"""End to end: `docker compose up -d --wait llamacpp-cpu`, drive it with the Locust workload, down.

Needs a Docker engine (bash scripts/docker_setup.sh) and the llama-server binary and GGUF that
scripts/build_llamacpp.sh builds; skipped with the reason where either is missing. Builds
llm-load-rig/llamacpp-cpu with scripts/build_images.sh if it is missing (a copy of the binary on
the local base image). Host networking (docker-compose.ci.yml) on 127.0.0.1, port
LLAMACPP_CPU_TEST_PORT (default 8102, away from a llama-server the developer may run on 8082).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import compose, ensure_images, require_free_port, run_locust, stream_completion, wait_healthy
from rig_helpers import assert_every_request_accounted, crash_under_run

from servers import translate
from servers.local import LOCAL

PORT = int(os.environ.get("LLAMACPP_CPU_TEST_PORT", "8102"))
PROJECT = "llm-load-rig-test-llamacpp"
SETTINGS = {"HOST": "127.0.0.1", "PORT": str(PORT), "MAX_CONCURRENT_REQUESTS": "8"}

pytestmark = pytest.mark.docker


def _compose(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return compose(PROJECT, "LLAMACPP_CPU", SETTINGS, *args, check=check)


@pytest.fixture(scope="module")
def container(docker_client: Any) -> Iterator[Any]:
    """The running, healthy llamacpp-cpu container (host network, 127.0.0.1:PORT); downed after."""
    why = LOCAL["llamacpp-cpu"].missing()
    if why:
        pytest.skip(why)
    require_free_port(PORT)
    ensure_images(docker_client, "llamacpp-cpu")
    try:
        _compose("up", "-d", "--wait", "--wait-timeout", "300", "llamacpp-cpu")
        container = docker_client.containers.get(_compose("ps", "-q", "llamacpp-cpu").stdout.strip())
        wait_healthy(container, timeout_s=60)
        yield container
    finally:
        _compose("down", "--timeout", "20", check=False)


def test_compose_runs_the_translated_command(container: Any) -> None:
    assert container.attrs["Config"]["Cmd"] == translate("llamacpp-cpu", SETTINGS)
    assert container.attrs["HostConfig"]["NetworkMode"] == "host"
    mounts = {m["Destination"]: m for m in container.attrs["Mounts"]}
    assert mounts["/models"]["RW"] is False


def test_container_streams_completions_with_usage(container: Any) -> None:
    events = stream_completion(PORT)
    assert events[-1] == "[DONE]"
    usage = [json.loads(e)["usage"] for e in events[:-1] if json.loads(e).get("usage")]
    assert usage and usage[-1]["completion_tokens"] > 0


def test_locust_fixed_workload_through_the_container(container: Any, tmp_path: Path) -> None:
    row = run_locust(PORT, tmp_path / "results", translate("llamacpp-cpu", SETTINGS), engine="llamacpp-cpu")
    assert int(row["completed"]) == 16 and int(row["failed"]) == 0, row
    assert int(row["output_tokens"]) > 0 and float(row["output_tok_per_s"]) > 0, row
    print(f"\nllamacpp-cpu container: {row['completed']} requests, {row['output_tokens']} output tokens, "
          f"{float(row['output_tok_per_s']):.1f} tok/s, ttft p50 {float(row['ttft_p50_ms']):.0f} ms")


def test_docker_kill_mid_run_is_recorded_and_leaves_no_container(container: Any, tmp_path: Path) -> None:
    """`docker kill` of the engine's container while the rig is mid-run (last in this module: it
    ends the container): every request is recorded with its reason, the row counts them, and
    the container is not running afterwards."""
    out = tmp_path / "out"
    log = crash_under_run(f"http://127.0.0.1:{PORT}", out, container.kill, "--engine", "llamacpp-cpu",
                          requests=200, max_tokens=128)
    assert_every_request_accounted(log, out, requests=200, max_tokens=128)
    container.reload()
    assert container.status == "exited", container.status
