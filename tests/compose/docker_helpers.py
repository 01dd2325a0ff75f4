"""Helpers for the tests that start real containers (the fixtures are in conftest.py)."""

from __future__ import annotations

import csv
import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from loadtest.launch.command import locust_command
from rig_helpers import VLLM_QUICK_ENV

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ROOT", "ensure_images", "ensure_tiny_model", "log_excerpt", "require_free_port", "run_locust",
           "stream_completion", "wait_healthy"]


def compose(project: str, env_prefix: str, settings: dict[str, str], *args: str,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    """`docker compose` on the rig's files with the CI override (host network) and
    quick.yml, as project `project`, with `settings` passed as the engine's .env
    variables (PREFIX_NAME)."""
    cmd = ["docker", "compose", "-p", project, "--project-directory", str(ROOT),
           "-f", str(ROOT / "docker-compose.yml"), "-f", str(ROOT / "docker-compose.ci.yml"),
           "-f", str(Path(__file__).with_name("quick.yml")), *args]
    env = {**os.environ, **VLLM_QUICK_ENV, **{f"{env_prefix}_{k}": v for k, v in settings.items()}}
    env.pop("HF_TOKEN", None)
    result = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, cwd=ROOT)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(cmd[2:])} failed: {result.stderr.strip()[-2000:]}")
    return result


def ensure_images(client: Any, *names: str) -> None:
    """Build the rig's local images (scripts/build_images.sh NAME) that are missing; fail if a build fails."""
    missing = []
    for name in names:
        tag = {"vllm-cpu": "llm-load-rig/vllm-cpu", "llamacpp-cpu": "llm-load-rig/llamacpp-cpu",
               "transformers-cpu": "llm-load-rig/transformers-cpu", "textgen-cpu": "llm-load-rig/textgen-cpu",
               "nginx": "llm-load-rig/nginx:bookworm"}[name]
        if not client.images.list(name=tag):
            missing.append(name)
    if not missing:
        return
    build = subprocess.run(["bash", str(ROOT / "scripts/build_images.sh"), *missing], check=False, capture_output=True, text=True)
    if build.returncode != 0:
        pytest.fail(f"scripts/build_images.sh {' '.join(missing)} failed: {build.stderr.strip()[-2000:]}")


def ensure_tiny_model() -> None:
    """models/tiny-llama, built with servers/vllm-cpu/tiny_model.py if missing."""
    model = ROOT / "models" / "tiny-llama"
    if (model / "config.json").exists():
        return
    build = subprocess.run([sys.executable, str(ROOT / "servers/vllm-cpu/tiny_model.py"), str(model)],
                           check=False, capture_output=True, text=True)
    if build.returncode != 0:
        pytest.fail(f"could not build {model}: {build.stderr.strip()[-2000:]}")


def require_free_port(port: int) -> None:
    with socket.socket() as sock:
        if sock.connect_ex(("127.0.0.1", port)) == 0:
            pytest.fail(f"127.0.0.1:{port} is already in use; set VLLM_CPU_TEST_PORT to a free port")


def log_excerpt(container: Any) -> str:
    """A container's error lines (the root cause is rarely the last line) and its last lines."""
    lines = container.logs(tail=500).decode(errors="replace").splitlines()
    causes = [line for line in lines if "Error:" in line or "Error(" in line]
    return "\n".join(["errors:", *causes[-6:], "last lines:", *lines[-15:]])


def wait_healthy(container: Any, timeout_s: float) -> None:
    """Return once Docker reports ``container`` healthy; fail with its logs if it stops or times out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        container.reload()
        state = container.attrs["State"]
        if state["Status"] != "running":
            pytest.fail(f"{container.name} {state['Status']} (exit {state.get('ExitCode')}):\n{log_excerpt(container)}")
        if state.get("Health", {}).get("Status") == "healthy":
            return
        time.sleep(0.5)
    pytest.fail(f"{container.name} not healthy after {timeout_s:.0f} s:\n{log_excerpt(container)}")


def run_locust(port: int, out: Path, flags: list[str], timeout_s: float = 600,
               engine: str = "vllm-cpu") -> dict[str, str]:
    """The fixed Locust workload (16 requests, 8 users, 32 tokens) against 127.0.0.1:PORT; its runs.csv row."""
    if not (ROOT / "loadtest" / "engines.py").exists():
        pytest.skip("loadtest/engines.py (the Locust client) does not exist yet")
    cmd = locust_command(host=f"http://127.0.0.1:{port}", users=8, python=sys.executable,
                         rig_options=["--engine", engine, "--requests", "16", "--prompts", "mixed",
                                      "--max-tokens", "32", "--out", str(out),
                                      "--flags", " ".join(flags)])
    run = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT, timeout=timeout_s)
    assert run.returncode == 0, run.stderr[-3000:]
    with open(out / "runs.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert list(out.rglob("requests.jsonl")), "no per-run requests.jsonl written"
    return row


def stream_completion(port: int) -> list[str]:
    """POST a streamed /v1/completions to 127.0.0.1:PORT; the SSE data payloads, in order.
    Greedy (temperature 0): the same answer every time. Sampled, the random-weight model's
    answer sometimes held a stray byte, after which text-generation-webui streams no text."""
    body = {"model": "tiny-llama", "prompt": "Hello", "max_tokens": 8, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 200
    events = [line[5:].strip() for line in response.read().decode().splitlines() if line.startswith("data:")]
    conn.close()
    return events
