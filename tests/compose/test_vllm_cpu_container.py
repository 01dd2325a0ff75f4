"""End to end: `docker compose up -d vllm-cpu`, wait for health, drive it with the Locust workload, down.

Needs a Docker engine (bash scripts/docker_setup.sh); skipped with the reason where none answers.
Builds llm-load-rig/vllm-cpu with scripts/build_images.sh if it is missing, and serves
models/tiny-llama. Uses host networking (docker-compose.ci.yml) on 127.0.0.1, port
VLLM_CPU_TEST_PORT (default 8100, away from a vLLM the developer may run on 8000).
"""

from __future__ import annotations

import csv
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from servers import translate
from servers.vllm_cpu import IMAGE

ROOT = Path(__file__).resolve().parents[2]
PORT = int(os.environ.get("VLLM_CPU_TEST_PORT", "8100"))
PROJECT = "llm-load-rig-test"
HEALTH_TIMEOUT_S = 900
LOCUST_TIMEOUT_S = 600
SETTINGS = {"HOST": "127.0.0.1", "PORT": str(PORT), "MAX_CONCURRENT_REQUESTS": "8"}
ENV = {f"VLLM_CPU_{k}": v for k, v in SETTINGS.items()}

pytestmark = pytest.mark.docker


def _docker_client() -> Any:
    """A Docker SDK client, or skip with the reason no engine answers."""
    import docker  # imported here, not at collection: it must not load ssl before Locust's gevent patch

    try:
        client = docker.from_env()
        client.ping()
    except Exception as err:  # docker.errors.DockerException and connection errors alike
        pytest.skip(f"no Docker engine answers ({type(err).__name__}); run: bash scripts/docker_setup.sh")
    return client


def _compose(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = ["docker", "compose", "-p", PROJECT, "--project-directory", str(ROOT),
           "-f", str(ROOT / "docker-compose.yml"), "-f", str(ROOT / "docker-compose.ci.yml"), *args]
    env = {**os.environ, **ENV}
    env.pop("HF_TOKEN", None)
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(cmd[2:])} failed: {result.stderr.strip()[-2000:]}")
    return result


def _ensure_image(client: Any) -> None:
    import docker

    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        build = subprocess.run(["bash", str(ROOT / "scripts/build_images.sh"), "vllm-cpu"],
                               capture_output=True, text=True)
        if build.returncode != 0:
            pytest.fail(f"scripts/build_images.sh vllm-cpu failed: {build.stderr.strip()[-2000:]}")


def _ensure_model() -> None:
    model = ROOT / "models" / "tiny-llama"
    if (model / "config.json").exists():
        return
    build = subprocess.run([sys.executable, str(ROOT / "servers/vllm-cpu/tiny_model.py"), str(model)],
                           capture_output=True, text=True)
    if build.returncode != 0:
        pytest.fail(f"could not build {model}: {build.stderr.strip()[-2000:]}")


def _log_excerpt(container: Any) -> str:
    """The container's error lines (the root cause is rarely the last line) and its last lines."""
    lines = container.logs(tail=500).decode(errors="replace").splitlines()
    causes = [line for line in lines if "Error:" in line or "Error(" in line]
    return "\n".join(["errors:", *causes[-6:], "last lines:", *lines[-15:]])


def _wait_healthy(client: Any) -> None:
    container_id = _compose("ps", "-q", "vllm-cpu").stdout.strip()
    assert container_id, "docker compose ps shows no vllm-cpu container"
    container = client.containers.get(container_id)
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    while time.monotonic() < deadline:
        container.reload()
        state = container.attrs["State"]
        if state["Status"] != "running":
            pytest.fail(f"vllm-cpu container {state['Status']} (exit {state.get('ExitCode')}):\n{_log_excerpt(container)}")
        if state.get("Health", {}).get("Status") == "healthy":
            return
        time.sleep(2)
    pytest.fail(f"vllm-cpu not healthy after {HEALTH_TIMEOUT_S} s:\n{_log_excerpt(container)}")


@pytest.fixture(scope="module")
def vllm_cpu_container() -> Iterator[Any]:
    """The running, healthy vllm-cpu container (host network, 127.0.0.1:PORT); downed after."""
    if shutil.which("docker") is None or subprocess.run(["docker", "compose", "version"],
                                                       capture_output=True).returncode != 0:
        pytest.skip("docker compose v2 is not installed (run: bash scripts/docker_setup.sh)")
    client = _docker_client()
    with socket.socket() as sock:
        if sock.connect_ex(("127.0.0.1", PORT)) == 0:
            pytest.fail(f"127.0.0.1:{PORT} is already in use; set VLLM_CPU_TEST_PORT to a free port")
    _ensure_model()
    _ensure_image(client)
    try:
        _compose("up", "-d", "vllm-cpu")
        _wait_healthy(client)
        yield client
    finally:
        _compose("down", "--timeout", "20", check=False)


def test_compose_runs_the_translated_command(vllm_cpu_container: Any) -> None:
    container_id = _compose("ps", "-q", "vllm-cpu").stdout.strip()
    container = vllm_cpu_container.containers.get(container_id)
    assert container.attrs["Config"]["Cmd"] == translate("vllm-cpu", SETTINGS)
    assert container.attrs["HostConfig"]["NetworkMode"] == "host"
    mounts = {m["Destination"]: m for m in container.attrs["Mounts"]}
    assert mounts["/models"]["RW"] is False


def test_container_streams_completions(vllm_cpu_container: Any) -> None:
    body = {"model": "tiny-llama", "prompt": "Hello", "max_tokens": 8, "stream": True,
            "stream_options": {"include_usage": True}}
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 200
    events = [line[5:].strip() for line in response.read().decode().splitlines() if line.startswith("data:")]
    conn.close()
    assert events[-1] == "[DONE]"
    usage = [json.loads(e)["usage"] for e in events[:-1] if json.loads(e).get("usage")]
    assert usage and usage[-1]["completion_tokens"] > 0


def test_locust_fixed_workload_through_the_container(vllm_cpu_container: Any, tmp_path: Path) -> None:
    if not (ROOT / "loadtest" / "engines.py").exists():
        pytest.skip("loadtest/engines.py (the Locust client) does not exist yet")
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "locust", "-f", str(ROOT / "loadtest/engines.py"), "--headless",
           "--users", "8", "--engine", "vllm-cpu", "--host", f"http://127.0.0.1:{PORT}",
           "--requests", "16", "--prompts", "mixed", "--max-tokens", "32", "--out", str(out),
           "--flags", " ".join(translate("vllm-cpu", SETTINGS))]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=LOCUST_TIMEOUT_S)
    assert run.returncode == 0, run.stderr[-3000:]
    with open(out / "runs.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert int(row["completed"]) == 16 and int(row["failed"]) == 0, row
    assert int(row["output_tokens"]) > 0 and float(row["output_tok_per_s"]) > 0, row
    assert list(out.rglob("requests.jsonl")), "no per-run requests.jsonl written"
