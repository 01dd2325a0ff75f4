"""sweeps/llamacpp-replicas-vs-split.yaml as `docker compose config` renders each layout: two
llama-server replicas, one per GPU, behind nginx, and one server over both GPUs for each
--split-mode. The files are the sweep's own (ComposeService.write_files); nothing is started.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loadtest.sweep.cells import unique_slugs
from loadtest.sweep.launch import ComposeService
from loadtest.sweep.matrix import load_matrix

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "sweeps" / "llamacpp-replicas-vs-split.yaml"


@pytest.fixture
def layouts(tmp_path: Path, require_compose: None, clean_env: Callable[[dict[str, str]], dict[str, str]]
            ) -> dict[str, tuple[ComposeService, dict[str, Any]]]:
    """Each configuration of the matrix: its launcher and the services Compose renders for it."""
    matrix = load_matrix(MATRIX, None)
    out = {}
    for config, slug in zip(matrix.configs, unique_slugs(matrix.configs)):
        service = ComposeService(config, 18081, tmp_path / slug, "llm-load-rig-sweep-test")
        service.write_files()
        # as the sweep's `up` names them: the replicas' whole file, or the engine's one service
        args = ["--profile", "lb", "config"] if config.replicas else ["config", config.engine]
        result = subprocess.run(service.command(*args, "--format", "json"), check=False,
                                capture_output=True, text=True, env=clean_env({}), cwd=ROOT)
        assert result.returncode == 0, result.stderr
        assert "variable is not set" not in result.stderr, result.stderr
        out[slug] = (service, json.loads(result.stdout)["services"])
    return out


def _devices(service: dict[str, Any]) -> list[str]:
    return service["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"]


def _after(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def test_two_gpu_replicas_behind_nginx(layouts: dict[str, tuple[ComposeService, dict[str, Any]]]) -> None:
    launcher, services = layouts["llamacpp-gpu0_1-replicas"]
    assert set(services) == {"llamacpp-gpu0", "llamacpp-gpu1", "llamacpp-lb"}
    for gpu in ("0", "1"):
        replica = services[f"llamacpp-gpu{gpu}"]
        assert _devices(replica) == [gpu]  # one GPU each
        assert "ports" not in replica
        command = replica["command"]
        assert _after(command, "--port") == "8080" and _after(command, "--parallel") == "128"
        assert _after(command, "--ctx-size") == "262144" and "--split-mode" not in command
    lb = services["llamacpp-lb"]
    assert lb["ports"][0]["published"] == "18081" and lb["ports"][0]["target"] == 80
    assert set(lb["depends_on"]) == {"llamacpp-gpu0", "llamacpp-gpu1"}
    conf = (launcher.workdir / "nginx.conf").read_text()
    assert "least_conn;" in conf and "proxy_buffering off;" in conf
    assert "server llamacpp-gpu0:8080 " in conf and "server llamacpp-gpu1:8080 " in conf


@pytest.mark.parametrize("mode", ["layer", "tensor"])
def test_one_server_split_over_both_gpus(mode: str,
                                         layouts: dict[str, tuple[ComposeService, dict[str, Any]]]) -> None:
    (slug,) = [s for s in layouts if f"split_mode_{mode}" in s]
    _, services = layouts[slug]
    assert set(services) == {"llamacpp"}  # the engine's own service, alone
    server = services["llamacpp"]
    assert _devices(server) == ["0,1"]  # both GPUs, one server
    command = server["command"]
    assert _after(command, "--split-mode") == mode
    assert _after(command, "--parallel") == "256" and _after(command, "--ctx-size") == "524288"
    assert server["ports"][0]["published"] == "18081"
