"""The flag sweep through the real `llamacpp-cpu` Compose service: start per configuration,
measure, down. (llama.cpp's container is healthy in seconds, vLLM's in a minute or more; the
sweep's Compose launch is the same for every service.)

Needs a Docker engine with Compose v2 and the llm-load-rig/llamacpp-cpu image
(scripts/docker_setup.sh, scripts/build_images.sh llamacpp-cpu); skipped with the reason where
they are missing. Host networking on a free port, like CI (dockerd --bridge=none).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loadtest.results.files import read_runs
from rig_helpers import streams_at_once
from servers.llamacpp_cpu import IMAGE

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.docker


def _docker_missing() -> str | None:
    if shutil.which("docker") is None:
        return "no docker CLI (run: bash scripts/docker_setup.sh)"
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0:
        return "no docker compose v2 (run: bash scripts/docker_setup.sh)"
    images = subprocess.run(["docker", "images", "-q", IMAGE], capture_output=True, text=True)
    if images.returncode != 0:
        return "no Docker engine answers (run: bash scripts/docker_setup.sh)"
    if not images.stdout.strip():
        return f"no image {IMAGE} (run: bash scripts/build_images.sh llamacpp-cpu)"
    return None


def test_flag_sweep_through_the_llamacpp_cpu_container(tmp_path: Path) -> None:
    reason = _docker_missing()
    if reason:
        pytest.skip(reason)
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "name: seqs-compose\nworkload: {prompts: mixed, requests: 32, max_tokens: 16, ignore_eos: true}\n"
        "users: [16]\nrepeats: 1\nwarmup_requests: 8\nhealth_timeout_s: 900\nengines:\n"
        "  - engine: llamacpp-cpu\n    launch: compose\n    network: host\n"
        "    sweep: {MAX_CONCURRENT_REQUESTS: [1, 16]}\n")
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "loadtest.sweep.flags", str(matrix), "--out", str(out)],
                            capture_output=True, text=True, cwd=REPO, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = read_runs(out / "runs.csv")
    assert {r["flags"] for r in runs} == {"MAX_CONCURRENT_REQUESTS=1", "MAX_CONCURRENT_REQUESTS=16"}
    # sixteen slots stream many answers at once, one slot few (not "faster": issue 38); by the
    # client's stamps one slot's answers still overlapped 2-3 (the container's, at full speed)
    streams = {r["flags"]: streams_at_once(Path(r["run_dir"]) / "requests.jsonl") for r in runs}
    assert 2 * streams["MAX_CONCURRENT_REQUESTS=1"] < streams["MAX_CONCURRENT_REQUESTS=16"], streams
    state = json.loads((out / "sweeps/seqs-compose/sweep.json").read_text())
    assert {c["status"] for c in state["configs"].values()} == {"ok"}
    folder = out / "sweeps/seqs-compose/llamacpp-cpu-parallel16"
    assert "LLAMACPP_CPU_MAX_CONCURRENT_REQUESTS=16" in (folder / "engine.env").read_text()
    assert "n_slots = 16" in (folder / "engine.log").read_text()  # llama-server's slots line
    label = "label=com.docker.compose.project=llm-load-rig-sweep-seqs-compose"
    left = subprocess.run(["docker", "ps", "-aq", "--filter", label], capture_output=True, text=True)
    assert left.stdout.strip() == "", "the sweep left a container behind"


def _compose_missing() -> str | None:
    if shutil.which("docker") is None or subprocess.run(["docker", "compose", "version"],
                                                       capture_output=True).returncode != 0:
        return "no docker compose v2 (run: bash scripts/docker_setup.sh)"
    return None


def _rendered(matrix: str, tmp_path: Path) -> list[dict]:
    """Each configuration of ``sweeps/MATRIX`` as Compose would run it: the services of
    `docker compose config` (nothing started), in the matrix's order."""
    from loadtest.sweep.launch import ComposeService
    from loadtest.sweep.matrix import load_matrix

    rendered = []
    for index, config in enumerate(load_matrix(REPO / "sweeps" / matrix, None).configs):
        service = ComposeService(config, 8123, tmp_path / str(index), "llm-load-rig-sweep-render")
        service.write_files()
        args = ["--profile", "lb"] if config.replicas else []
        result = subprocess.run(service.command(*args, "config", "--format", "json"), capture_output=True,
                                text=True)
        assert result.returncode == 0, result.stderr
        rendered.append(json.loads(result.stdout)["services"])
    return rendered


def _gpus(svc: dict) -> list[str]:
    return svc["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"]


def test_gpu_matrix_renders_replicas_and_shards_for_compose(tmp_path: Path) -> None:
    """replicas-vs-shards.yaml as Compose would run it (`docker compose config`, nothing started)."""
    if reason := _compose_missing():
        pytest.skip(reason)
    replicas, shards = _rendered("replicas-vs-shards.yaml", tmp_path)
    assert set(replicas) == {"tgi-gpu0", "tgi-gpu1", "tgi-lb"}
    assert _gpus(replicas["tgi-gpu0"]) == ["0"] and _gpus(replicas["tgi-gpu1"]) == ["1"]
    assert [p["published"] for p in replicas["tgi-lb"]["ports"]] == ["8123"]
    tgi = shards["tgi"]
    assert _gpus(tgi) == ["0,1"] and tgi["command"][-2:] == ["--num-shard", "2"]
    assert [p["published"] for p in tgi["ports"]] == ["8123"]


def test_vllm_layout_matrix_renders_for_compose(tmp_path: Path) -> None:
    """gpu-vllm-layouts-2gpu-compose.yaml: replicas on a GPU each behind the balancer, the split
    server with one API server and with two, data parallel; NVLink multicast off everywhere."""
    if reason := _compose_missing():
        pytest.skip(reason)
    replicas, split, split_api2, data_parallel, aph_replicas, aph_split = _rendered(
        "gpu-vllm-layouts-2gpu-compose.yaml", tmp_path)
    assert set(replicas) == {"vllm-gpu0", "vllm-gpu1", "vllm-lb"}
    assert _gpus(replicas["vllm-gpu0"]) == ["0"] and _gpus(replicas["vllm-gpu1"]) == ["1"]
    assert set(aph_replicas) == {"aphrodite-gpu0", "aphrodite-gpu1", "aphrodite-lb"}
    servers = [replicas["vllm-gpu0"], replicas["vllm-gpu1"], split["vllm"], split_api2["vllm"],
               data_parallel["vllm"], aph_replicas["aphrodite-gpu0"], aph_split["aphrodite"]]
    for server in servers:
        env = server["environment"]
        assert (env["NCCL_NVLS_ENABLE"], env["TORCH_SYMM_MEM_DISABLE_MULTICAST"],
                env["NVSHMEM_DISABLE_NVLS"]) == ("0", "1", "1")
        assert "Qwen/Qwen2.5-7B-Instruct" in server["command"]
    for single in (split["vllm"], split_api2["vllm"], data_parallel["vllm"], aph_split["aphrodite"]):
        assert _gpus(single) == ["0,1"]
    assert " ".join(split["vllm"]["command"]).endswith("--tensor-parallel-size 2")
    assert " ".join(split_api2["vllm"]["command"]).endswith("--tensor-parallel-size 2 --api-server-count 2")
    assert " ".join(data_parallel["vllm"]["command"]).endswith("--data-parallel-size 2")
    assert "--api-server-count" not in " ".join(split["vllm"]["command"])


def test_vllm_four_gpu_layout_matrix_renders_for_compose(tmp_path: Path) -> None:
    """gpu-vllm-layouts-4gpu-compose.yaml: four replicas, TP=4 with one and four API servers, two
    TP=2 replicas of two GPUs each (with one and two API servers), data parallel over four."""
    if reason := _compose_missing():
        pytest.skip(reason)
    replicas, tp4, tp4_api4, tp2s, tp2s_api2, data_parallel = _rendered(
        "gpu-vllm-layouts-4gpu-compose.yaml", tmp_path)
    assert {name: _gpus(svc) for name, svc in replicas.items() if name != "vllm-lb"} == {
        f"vllm-gpu{i}": [str(i)] for i in range(4)}
    for pair in (tp2s, tp2s_api2):
        assert {name: _gpus(svc) for name, svc in pair.items() if name != "vllm-lb"} == {
            "vllm-gpu0_1": ["0", "1"], "vllm-gpu2_3": ["2", "3"]}
    tails = {" ".join(tp4["vllm"]["command"]).split("Instruct ")[-1],
             " ".join(tp4_api4["vllm"]["command"]).split("Instruct ")[-1],
             " ".join(tp2s_api2["vllm-gpu2_3"]["command"]).split("Instruct ")[-1],
             " ".join(data_parallel["vllm"]["command"]).split("Instruct ")[-1]}
    assert tails == {"--tensor-parallel-size 4", "--tensor-parallel-size 4 --api-server-count 4",
                     "--tensor-parallel-size 2 --api-server-count 2", "--data-parallel-size 4"}
    for single in (tp4, tp4_api4, data_parallel):
        assert _gpus(single["vllm"]) == ["0,1,2,3"]
        assert single["vllm"]["environment"]["NCCL_NVLS_ENABLE"] == "0"
