"""Replicas as local processes behind a local nginx (loadtest/sweep/launch.py LocalReplicas),
interleaved repeats and requests per user (issue 14).

The real sweep runs two llama-server replicas (llamacpp-cpu, the tiny model) behind nginx, as
scripts/sweep_flags.sh does; it needs scripts/build_llamacpp.sh's build and an nginx (Debian's
nginx-light, which scripts/test.sh installs), and is skipped with the reason where either is
missing. The order and request-count tests need neither.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest

import servers.balancer as balancer
from loadtest.sweep import flags, runner
from loadtest.sweep.cells import expand_cells
from loadtest.sweep.launch import EngineFailed, RunningEngine
from loadtest.sweep.matrix import load_matrix, parse_matrix
from loadtest.launch import Launched
from loadtest.sweep.runner import schedule
from servers.local import LOCAL

REPO = Path(__file__).resolve().parents[1]

MATRIX = """\
name: replicas
workload: {prompts: mixed, requests: 8, requests_per_user: 3, max_tokens: 8, ignore_eos: true}
users: [4]
repeats: 2
interleave_repeats: true
warmup_requests: 4
health_timeout_s: 300
run_timeout_s: 300
engines:
  - engine: llamacpp-cpu
    launch: local
    replicas: 2
    settings: {MAX_CONCURRENT_REQUESTS: 4, MAX_TOTAL_TOKENS: 512}
"""


def _needs_replicas() -> None:
    why = LOCAL["llamacpp-cpu"].missing() or balancer.nginx_missing()
    if why:
        pytest.skip(why)


def _served(log: Path) -> int:
    """Requests a llama-server finished, from its log (one slot release per request)."""
    return len(re.findall(r"slot +release:", log.read_text(errors="replace")))


def _left_running(ports: list[str], folder: Path) -> list[str]:
    """Processes still listening on the sweep's ports or running from its folder (nginx -p)."""
    left = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        by_port = "--port" in cmdline and any(p in cmdline for p in ports)
        if by_port or any(str(folder) in part for part in cmdline):
            left.append(" ".join(cmdline))
    return left


@pytest.mark.engine
def test_two_local_replicas_behind_nginx_serve_a_real_sweep(tmp_path: Path) -> None:
    _needs_replicas()
    (tmp_path / "m.yaml").write_text(MATRIX)
    out = tmp_path / "out"
    result = subprocess.run(["bash", str(REPO / "scripts" / "sweep_flags.sh"), str(tmp_path / "m.yaml"),
                             "--out", str(out)], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    err = result.stderr
    folder = out / "sweeps" / "replicas" / "llamacpp-cpu-replicas2"

    # interleaved: started once per repeat, repeat 1 measured and stopped before repeat 2
    starts = [line for line in err.splitlines() if line.startswith("start llamacpp-cpu-replicas2: ")]
    assert len(starts) == 2, err
    order = [line for line in err.splitlines() if line.startswith(("start ", "run ", "stopped "))]
    assert [line.split(":")[0] for line in order] == [
        "start llamacpp-cpu-replicas2", "run llamacpp-cpu-replicas2/u4-r1", "stopped llamacpp-cpu-replicas2",
        "start llamacpp-cpu-replicas2", "run llamacpp-cpu-replicas2/u4-r2", "stopped llamacpp-cpu-replicas2"]
    assert all(line.count("llama-server") == 2 and " -p " in line for line in starts)

    # the rows: 3 requests per user at 4 users (more than requests: 8), each valid or saying why
    with (out / "runs.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert sorted(r["repeat"] for r in rows) == ["1", "2"]
    replicas: set[str] = set()
    for row in rows:
        assert row["requests"] == "12" and row["completed"] == "12" and row["failed"] == "0", row
        assert row["flags"] == "MAX_CONCURRENT_REQUESTS=4 MAX_TOTAL_TOKENS=512 REPLICAS=2"
        assert row["verdict"] == "valid" or row["verdict_reasons"], row
        # each replica's own /metrics (nginx serves none), read and merged as one engine's
        assert row["telemetry_engine"] == "sampled", row
        assert row["prefix_cache_reset"].endswith("(each of 2 replicas)"), row
        # the client keeps off the replicas' cores, found behind nginx by their own ports
        assert row["client_pinned_by"].startswith("rig: beside llamacpp-cpu (pid "), row
        # each replica's process tree measured: llama.cpp is one process, named by its comm
        assert float(row["engine_process_cpu_max_pct"]) > 0, row
        assert row["engine_process_cpu_max_name"] == "llama-server", row
        listed = json.loads((Path(row["run_dir"]) / "run.json").read_text())["engine_processes"]
        busiest = float(row["engine_process_cpu_max_pct"])
        assert listed[0]["cpu_pct"] == pytest.approx(busiest, rel=1e-5)  # runs.csv keeps 6 digits
        replicas |= {p["replica"] for p in listed}
    state = json.loads((out / "sweeps" / "replicas" / "sweep.json").read_text())
    assert state["configs"]["llamacpp-cpu-replicas2"]["status"] == "ok"
    assert {c["status"] for c in state["cells"].values()} == {"ok"}

    # both replicas served requests (their logs of the last start: warm-up 4 + run 12)
    served = [_served(folder / f"engine-{i}.log") for i in (0, 1)]
    assert min(served) > 0 and sum(served) == 16, served
    assert "least_conn;" in (folder / "nginx.conf").read_text()
    assert (out / "sweeps" / "replicas" / "report" / "report.md").is_file(), err

    # nothing left: no replica on its port, no nginx run from the sweep's folder
    ports = [p for line in starts for p in re.findall(r"--port (\d+)", line)]
    assert len(ports) == 4
    assert replicas and replicas <= {f"http://127.0.0.1:{p}" for p in ports}, replicas
    assert _left_running(ports, folder) == []


def test_a_missing_nginx_is_one_error_line_naming_how_to_get_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    if LOCAL["llamacpp-cpu"].missing():  # the engine is checked first, as it should be
        pytest.skip(LOCAL["llamacpp-cpu"].missing() or "")
    (tmp_path / "m.yaml").write_text(MATRIX)
    monkeypatch.delenv("RIG_NGINX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nginx on PATH
    monkeypatch.setattr(balancer, "_SBIN_NGINX", str(tmp_path / "no-nginx"))
    assert flags.main([str(tmp_path / "m.yaml"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: launch: local with replicas: no nginx") and err.count("\n") == 1
    assert "apt-get install nginx-light" in err and "RIG_NGINX" in err
    assert not (tmp_path / "out" / "runs.csv").exists()

    monkeypatch.setenv("RIG_NGINX", str(tmp_path / "nowhere" / "nginx"))
    assert flags.main([str(tmp_path / "m.yaml"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: launch: local with replicas: RIG_NGINX=") and err.count("\n") == 1
    assert "is not an executable file" in err


def _plan(interleave: bool) -> list[tuple[str, list[str]]]:
    data: dict[str, Any] = {
        "name": "order", "workload": {"requests": 8, "max_tokens": 8}, "users": [1, 4], "repeats": 3,
        "interleave_repeats": interleave,
        "engines": [{"engine": "vllm-cpu", "launch": "local", "sweep": {"MAX_CONCURRENT_REQUESTS": [2, 8]}}]}
    matrix = parse_matrix(data, None)
    plan = expand_cells(matrix, "sha")
    return [(slug, [c.name for c in cells]) for _, slug, cells in schedule(plan, matrix.interleave_repeats)]


def test_interleaved_repeats_start_every_configuration_once_per_repeat() -> None:
    a, b = "vllm-cpu-maxnumseqs2", "vllm-cpu-maxnumseqs8"
    assert _plan(interleave=True) == [
        (a, ["u1-r1", "u4-r1"]), (b, ["u1-r1", "u4-r1"]),
        (a, ["u1-r2", "u4-r2"]), (b, ["u1-r2", "u4-r2"]),
        (a, ["u1-r3", "u4-r3"]), (b, ["u1-r3", "u4-r3"])]
    assert _plan(interleave=False) == [
        (a, ["u1-r1", "u1-r2", "u1-r3", "u4-r1", "u4-r2", "u4-r3"]),
        (b, ["u1-r1", "u1-r2", "u1-r3", "u4-r1", "u4-r2", "u4-r3"])]


def test_requests_per_user_gives_the_larger_of_requests_and_per_user_times_users(tmp_path: Path) -> None:
    """The layouts matrix: requests 192, 2 per user -> 192, 192, 256, 512 at 24, 64, 128, 256."""
    path = REPO / "sweeps" / "llamacpp-replicas-vs-split.yaml"
    workload = load_matrix(path, None).workload
    assert [workload.requests_at(u) for u in (24, 64, 128, 256)] == [192, 192, 256, 512]
    result = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "loadtest.sweep.flags", str(path),
                             "--dry-run", "--out", str(tmp_path)],
                            capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    cells = re.findall(r"^u(\d+)-r\d+ \[\w+\]: .* --requests (\d+) ", result.stdout, re.M)
    assert len(cells) == 36  # 3 layouts x 4 user counts x 3 repeats
    assert {(int(u), int(n)) for u, n in cells} == {(24, 192), (64, 192), (128, 256), (256, 512)}
    assert "repeats interleaved" in result.stdout
    with pytest.raises(Exception, match="requests_per_user must be a whole number"):
        parse_matrix({"name": "x", "workload": {"requests_per_user": -1}, "users": [1],
                      "engines": [{"engine": "vllm-cpu", "launch": "local"}]}, None)


class _FailsFirstStart(RunningEngine):
    """A launcher whose first start fails: what an interleaved sweep records across starts."""

    starts = 0

    def __init__(self, *_: object) -> None:
        super().__init__("http://127.0.0.1:9")

    def start(self, timeout_s: float) -> None:
        type(self).starts += 1
        if type(self).starts == 1:
            raise EngineFailed("boom on the first start", "its log tail")


def test_an_interleaved_configuration_keeps_an_earlier_failed_start_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data: dict[str, Any] = {"name": "again", "workload": {"requests": 8, "max_tokens": 8}, "users": [1],
                            "repeats": 2, "interleave_repeats": True, "warmup_requests": 0,
                            "engines": [{"engine": "vllm-cpu", "launch": "local"}]}
    monkeypatch.setattr(runner, "make_launcher", _FailsFirstStart)
    monkeypatch.setattr(runner, "preflight", lambda *_: None)
    monkeypatch.setattr(runner, "run",
                        lambda *_: Launched(0, "", "", {"run_id": "run-2", "rig_version": "v"}))
    monkeypatch.setattr(runner, "find_row", lambda *_: {"run_id": "run-2", "rig_version": "v"})
    monkeypatch.setattr(runner, "print_tables", lambda *_: 0)
    assert runner.run_sweep(parse_matrix(data, None), tmp_path, kind="flags") == 1
    state = json.loads((tmp_path / "sweeps" / "again" / "sweep.json").read_text())
    assert _FailsFirstStart.starts == 2  # started again for repeat 2
    config = state["configs"]["vllm-cpu"]
    assert config["status"] == "failed" and config["reason"] == "boom on the first start"
    assert config["log_tail"] == "its log tail"
    assert sorted((c["repeat"], c["status"]) for c in state["cells"].values()) == [(1, "failed"), (2, "ok")]


def test_the_local_balancer_configuration_is_valid_nginx(tmp_path: Path) -> None:
    """`nginx -t` on local_nginx_conf, as root too (pid, temp files and log in one folder); the
    engine's /metrics is not balanced (a scrape would reach either replica)."""
    why = balancer.nginx_missing()
    if why:
        pytest.skip(why)
    conf = tmp_path / "nginx.conf"
    conf.write_text(balancer.local_nginx_conf(["127.0.0.1:1", "127.0.0.1:2"], 9, tmp_path))
    (tmp_path / "temp").mkdir()
    nginx = balancer.nginx_binary() or "nginx"
    result = subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(conf), "-e", "stderr"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "location = /metrics {\n            return 404;" in conf.read_text()


def test_replicas_and_their_nginx_keep_off_the_clients_core(tmp_path: Path) -> None:
    """As one local engine does: the client keeps the first core, every replica and nginx the
    rest (they were unpinned, free to take the client's core)."""
    from loadtest.cpus import default_layout
    from loadtest.sweep.launch import LocalProcess, LocalReplicas

    engine_cores = default_layout()[0]
    if not engine_cores:
        pytest.skip("one core: nothing is pinned")
    data: dict[str, Any] = {"name": "pin", "workload": {"requests": 8, "max_tokens": 8}, "users": [4],
                            "engines": [{"engine": "llamacpp-cpu", "launch": "local", "replicas": 2}]}
    config = expand_cells(parse_matrix(data, None), "sha")[0][0]
    pin = ["taskset", "-c", engine_cores]
    replicas = LocalReplicas(config, 18000, tmp_path)
    assert [r.command()[:3] for r in replicas.replicas.values()] == [pin, pin]
    assert replicas.balancer_command()[:3] == pin
    assert LocalProcess(config, 18001, tmp_path / "engine.log").engine.command()[:3] == pin


def test_replicas_per_gpu_with_shards_are_groups_of_that_many_gpus(tmp_path: Path) -> None:
    """Four GPUs as two TP=2 vLLMs behind nginx; a GPU set the shards do not divide is refused."""
    from loadtest.sweep.launch import LocalReplicas
    from loadtest.sweep.matrix import MatrixError

    entry = {"engine": "vllm", "launch": "local", "gpus": ["0,1,2,3"], "replicas": "per-gpu",
             "settings": {"SHARDS": 2}}
    data: dict[str, Any] = {"name": "tp2x2", "workload": {"requests": 8, "max_tokens": 8}, "users": [4],
                            "engines": [entry]}
    replicas = LocalReplicas(expand_cells(parse_matrix(data, None), "sha")[0][0], 18000, tmp_path)
    assert {name: r.env["CUDA_VISIBLE_DEVICES"] for name, r in replicas.replicas.items()} == {
        "gpu0_1": "0,1", "gpu2_3": "2,3"}
    assert all("--tensor-parallel-size" in r.command() for r in replicas.replicas.values())
    with pytest.raises(MatrixError, match=r"replicas of 2 GPUs each, which GPUs 0,1,2 \(3\) do not divide"):
        parse_matrix({**data, "engines": [{**entry, "gpus": ["0,1,2"]}]}, None)
