"""servers/balancer.py: one replica per GPU behind nginx, as `docker compose config` renders it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from servers import translate
from servers.balancer import gpu_groups, main, nginx_conf, render

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def lb_config(tmp_path: Path, require_compose: None, clean_env: Callable[[dict[str, str]], dict[str, str]]
              ) -> Callable[[str, list[str | None], dict[str, str]], dict[str, Any]]:
    """Render the balancer file for (engine, GPUs, env) and return `docker compose config`'s services."""

    def run(slug: str, gpus: list[str | None], env: dict[str, str]) -> dict[str, Any]:
        return _config(tmp_path, slug, gpus, clean_env(env))

    return run


def _config(tmp_path: Path, slug: str, gpus: list[str | None], env: dict[str, str]) -> dict[str, Any]:
    compose_text, conf_text = render(slug, gpus, str(tmp_path / "nginx.conf"))
    (tmp_path / "lb.yml").write_text(compose_text)
    (tmp_path / "nginx.conf").write_text(conf_text)
    (tmp_path / "empty.env").write_text("")
    cmd = ["docker", "compose", "--project-directory", str(ROOT), "-f", str(tmp_path / "lb.yml"),
           "--env-file", str(tmp_path / "empty.env"), "--profile", "lb", "config", "--format", "json"]
    result = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["services"]


def test_one_replica_per_gpu_behind_nginx_on_the_engines_port(tmp_path: Path, lb_config: Any) -> None:
    services = lb_config("tgi", ["0", "1", "3"], {"TGI_MAX_CONCURRENT_REQUESTS": "256"})
    assert set(services) == {"tgi-gpu0", "tgi-gpu1", "tgi-gpu3", "tgi-lb"}
    for gpu in ("0", "1", "3"):
        replica = services[f"tgi-gpu{gpu}"]
        assert replica["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == [gpu]
        assert replica["command"] == translate("tgi", {"MAX_CONCURRENT_REQUESTS": "256"})
        assert "ports" not in replica
    lb = services["tgi-lb"]
    assert (lb["ports"][0]["host_ip"], lb["ports"][0]["published"], lb["ports"][0]["target"]) == ("127.0.0.1", "8080", 80)
    assert {name: dep["condition"] for name, dep in lb["depends_on"].items()} == {
        "tgi-gpu0": "service_healthy", "tgi-gpu1": "service_healthy", "tgi-gpu3": "service_healthy"}
    conf = (tmp_path / "nginx.conf").read_text()
    assert "server tgi-gpu3:80 " in conf


def test_replicas_of_two_gpus_each_are_tensor_parallel_servers(tmp_path: Path, lb_config: Any) -> None:
    """Four GPUs as two TP=2 servers behind one balancer (issue 33's four-GPU layout)."""
    assert gpu_groups("0,1,2,3", 2) == ["0,1", "2,3"] and gpu_groups("0,1", 1) == ["0", "1"]
    services = lb_config("vllm", gpu_groups("0,1,2,3", 2), {"VLLM_SHARDS": "2", "VLLM_GPUS": "0,1,2,3"})
    assert set(services) == {"vllm-gpu0_1", "vllm-gpu2_3", "vllm-lb"}
    assert services["vllm-gpu2_3"]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == ["2", "3"]
    assert "--tensor-parallel-size" in services["vllm-gpu0_1"]["command"]


def test_cpu_engine_replicas_listen_on_the_default_port_inside(tmp_path: Path, lb_config: Any) -> None:
    services = lb_config("vllm-cpu", [None, None], {"VLLM_CPU_PORT": "8100"})
    assert services["vllm-cpu-0"]["command"][:4] == ["--host", "0.0.0.0", "--port", "8000"]
    assert services["vllm-cpu-lb"]["ports"][0]["published"] == "8100"
    assert "server vllm-cpu-1:8000 " in (tmp_path / "nginx.conf").read_text()


def test_nginx_streams_and_balances_by_least_connections() -> None:
    conf = nginx_conf(["a:80", "b:80"])
    for line in ("least_conn;", "proxy_buffering off;", "proxy_http_version 1.1;", "proxy_read_timeout 3600s;",
                 "server a:80 max_fails=3", "server b:80 max_fails=3"):
        assert line in conf


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tgi", "0,0"], "error: GPUS lists a GPU twice"),
        (["vllm-cpu", "0,1"], "error: vllm-cpu runs on CPU: use --replicas N"),
        (["tgi", "--replicas", "2"], "error: tgi runs on GPUs"),
        (["nope", "0"], "error: unknown engine 'nope'"),
        (["tgi"], "error: usage: python -m servers.balancer"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1
