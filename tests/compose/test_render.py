"""docker-compose.yml: the engine command lines and GPU reservations `docker compose config` shows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from servers import ENGINES, SETTINGS, SettingError, translate, validate
from servers.compose import render_compose, render_env_example
from servers.registry import from_env, refusal
from servers.settings import FLAG_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
QWEN = "Qwen/Qwen2.5-0.5B-Instruct"

# (engine, .env settings, the exact engine argv docker compose must render)
CASES: list[tuple[str, dict[str, str], list[str]]] = [
    ("tgi", {}, ["--hostname", "0.0.0.0", "--port", "80", "--model-id", QWEN]),
    (
        "tgi",
        {
            "TGI_MODEL": "/models/my-finetune", "TGI_DTYPE": "bfloat16", "TGI_SPECULATE": "2",
            "TGI_MAX_TOTAL_TOKENS": "4096", "TGI_MAX_INPUT_TOKENS": "4000",
            "TGI_MAX_BATCH_PREFILL_TOKENS": "8192", "TGI_MAX_CONCURRENT_REQUESTS": "256",
            "TGI_SHARDS": "2", "TGI_GPU_MEMORY_FRACTION": "0.9", "TGI_GPUS": "2,3",
        },
        [
            "--hostname", "0.0.0.0", "--port", "80", "--model-id", "/models/my-finetune",
            "--dtype", "bfloat16", "--speculate", "2", "--max-total-tokens", "4096",
            "--max-input-tokens", "4000", "--max-batch-prefill-tokens", "8192",
            "--max-concurrent-requests", "256", "--num-shard", "2", "--cuda-memory-fraction", "0.9",
        ],
    ),
    ("tgi", {"TGI_QUANTIZE": "awq", "TGI_SPECULATE": ""}, ["--hostname", "0.0.0.0", "--port", "80",
                                                          "--model-id", QWEN, "--quantize", "awq"]),
    (
        "vllm",
        {"VLLM_SPECULATE": "2", "VLLM_MAX_TOTAL_TOKENS": "4096", "VLLM_SHARDS": "2", "VLLM_GPUS": "1,2",
         "VLLM_MAX_BATCH_PREFILL_TOKENS": "8192", "VLLM_MAX_CONCURRENT_REQUESTS": "256",
         "VLLM_GPU_MEMORY_FRACTION": "0.85", "VLLM_QUANTIZE": "fp8", "VLLM_SERVED_MODEL_NAME": "qwen"},
        [
            "--host", "0.0.0.0", "--port", "8000", "--model", QWEN, "--served-model-name", "qwen",
            "--quantization", "fp8",
            "--speculative-config.method", "ngram", "--speculative-config.num_speculative_tokens", "2",
            "--speculative-config.prompt_lookup_max", "4",
            "--max-model-len", "4096", "--max-num-batched-tokens", "8192", "--max-num-seqs", "256",
            "--tensor-parallel-size", "2", "--gpu-memory-utilization", "0.85",
        ],
    ),
    (
        "vllm",
        {"VLLM_EXTRA_ARGS": "--enforce-eager --generation-config 'vllm'"},
        ["--host", "0.0.0.0", "--port", "8000", "--model", QWEN, "--enforce-eager", "--generation-config", "vllm"],
    ),
    (
        "aphrodite",
        {"APHRODITE_SPECULATE": "3", "APHRODITE_MAX_TOTAL_TOKENS": "2048", "APHRODITE_GPUS": "4"},
        [
            "--host", "0.0.0.0", "--port", "2242", "--model", QWEN, "--speculative-model", "[ngram]",
            "--num-speculative-tokens", "3", "--ngram-prompt-lookup-max", "4", "--max-model-len", "2048",
        ],
    ),
    (
        "textgen",
        {"TEXTGEN_MODEL": "my-finetune.gguf", "TEXTGEN_MAX_CONCURRENT_REQUESTS": "8", "TEXTGEN_EXTRA_ARGS": "--threads 4"},
        ["python3", "/app/server.py", "--api", "--listen", "--listen-host", "0.0.0.0", "--api-port", "5000",
         "--model-dir", "/models", "--loader", "llama.cpp", "--n-gpu-layers", "999", "--extra-flags", "metrics",
         "--model", "my-finetune.gguf", "--parallel", "8", "--threads", "4"],
    ),
    (
        "llamacpp",
        {"LLAMACPP_MODEL": "/models/qwen-q4.gguf", "LLAMACPP_MAX_CONCURRENT_REQUESTS": "8", "LLAMACPP_GPUS": "0,1"},
        ["--host", "0.0.0.0", "--port", "8080", "--n-gpu-layers", "999", "--metrics",
         "--slot-save-path", "/tmp", "--cache-ram", "0", "--model", "/models/qwen-q4.gguf", "--parallel", "8"],
    ),
    (
        "sglang",
        {"SGLANG_MAX_TOTAL_TOKENS": "4096", "SGLANG_SHARDS": "2", "SGLANG_GPUS": "6,7",
         "SGLANG_GPU_MEMORY_FRACTION": "0.8", "SGLANG_MAX_CONCURRENT_REQUESTS": "64",
         "SGLANG_MAX_BATCH_PREFILL_TOKENS": "16384"},
        ["python3", "-m", "sglang.launch_server", "--host", "0.0.0.0", "--port", "30000", "--enable-metrics",
         "--model-path", QWEN, "--context-length", "4096", "--max-prefill-tokens", "16384",
         "--max-running-requests", "64", "--tp-size", "2", "--mem-fraction-static", "0.8"],
    ),
    (
        "vllm-cpu",
        {},
        ["--host", "0.0.0.0", "--port", "8000", "--model", "/models/tiny-llama", "--served-model-name",
         "tiny-llama", "--dtype", "bfloat16", "--max-model-len", "2048"],
    ),
    (
        "vllm-cpu",
        {"VLLM_CPU_HOST": "127.0.0.1", "VLLM_CPU_PORT": "8100", "VLLM_CPU_MAX_CONCURRENT_REQUESTS": "8"},
        ["--host", "127.0.0.1", "--port", "8100", "--model", "/models/tiny-llama", "--served-model-name",
         "tiny-llama", "--dtype", "bfloat16", "--max-model-len", "2048", "--max-num-seqs", "8"],
    ),
    (
        "transformers",
        {"TRANSFORMERS_MAX_BATCH_PREFILL_TOKENS": "64", "TRANSFORMERS_EXTRA_ARGS": "--cb-num-blocks 64"},
        ["--continuous-batching", "--device", "cpu", "--cb-num-blocks", "512", "--host", "0.0.0.0",
         "--port", "8090", "/models/tiny-llama", "--dtype", "bfloat16", "--cb-max-batch-tokens", "64",
         "--cb-num-blocks", "64"],
    ),
    (
        "llamacpp-cpu",
        {},
        ["--host", "0.0.0.0", "--port", "8082", "--metrics", "--slot-save-path", "/tmp", "--cache-ram", "0", "--model", "/models/tiny-llama.gguf",
         "--alias", "tiny-llama", "--kv-unified-per-slot", "2048", "--parallel", "128"],
    ),
    (
        "llamacpp-cpu",
        {"LLAMACPP_CPU_HOST": "127.0.0.1", "LLAMACPP_CPU_PORT": "8102", "LLAMACPP_CPU_MAX_TOTAL_TOKENS": "512",
         "LLAMACPP_CPU_MAX_CONCURRENT_REQUESTS": "8", "LLAMACPP_CPU_EXTRA_ARGS": "--threads-http 16"},
        ["--host", "127.0.0.1", "--port", "8102", "--metrics", "--slot-save-path", "/tmp", "--cache-ram", "0", "--model", "/models/tiny-llama.gguf",
         "--alias", "tiny-llama", "--kv-unified-per-slot", "512", "--parallel", "8", "--threads-http", "16"],
    ),
]


def _gpu_ids(service: dict[str, Any]) -> list[str]:
    (device,) = service["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    return device["device_ids"]


def test_committed_files_match_the_registry() -> None:
    assert (ROOT / "docker-compose.yml").read_text() == render_compose(), "run: python -m servers.compose"
    assert (ROOT / ".env.example").read_text() == render_env_example(), "run: python -m servers.compose"


@pytest.mark.parametrize("slug", list(ENGINES))
def test_every_flag_setting_is_mapped_or_refused(slug: str) -> None:
    eng = ENGINES[slug]
    assert not set(eng.flags) & set(eng.refused)
    assert set(eng.flags) | set(eng.refused) | {"EXTRA_ARGS"} == set(FLAG_SETTINGS)


@pytest.mark.parametrize(("slug", "env", "argv"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_compose_renders_the_exact_engine_command(
    config: Callable[[dict[str, str]], dict[str, Any]], slug: str, env: dict[str, str], argv: list[str]
) -> None:
    service = config(env)["services"][slug]
    assert service["command"] == argv
    assert translate(slug, from_env(slug, env)) == argv


@pytest.mark.parametrize(("slug", "env", "argv"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_gpu_reservation_follows_gpus_setting(
    config: Callable[[dict[str, str]], dict[str, Any]], slug: str, env: dict[str, str], argv: list[str]
) -> None:
    service = config(env)["services"][slug]
    gpus = env.get(f"{slug.upper().replace('-', '_')}_GPUS", "0")
    if ENGINES[slug].gpu:
        # One entry holding "1,2": Docker joins device_ids with "," into NVIDIA_VISIBLE_DEVICES,
        # so ["1,2"] reserves the same GPUs as ["1", "2"] (moby daemon/nvidia_linux.go).
        assert _gpu_ids(service) == [gpus]
    else:
        assert "deploy" not in service


def test_two_engines_side_by_side_on_different_gpus(config: Callable[[dict[str, str]], dict[str, Any]]) -> None:
    services = config({"TGI_GPUS": "0", "VLLM_GPUS": "1,2", "VLLM_SHARDS": "2"})["services"]
    assert _gpu_ids(services["tgi"]) == ["0"]
    assert _gpu_ids(services["vllm"]) == ["1,2"]
    assert "--tensor-parallel-size" in services["vllm"]["command"]
    published = {name: (s["ports"][0]["host_ip"], s["ports"][0]["published"]) for name, s in services.items()}
    assert published["tgi"] == ("127.0.0.1", "8080")
    assert published["vllm"] == ("127.0.0.1", "8000")
    assert published["llamacpp"] == ("127.0.0.1", "8081")


def test_default_host_ports_are_the_clients_defaults(config: Callable[[dict[str, str]], dict[str, Any]]) -> None:
    services = config({})["services"]
    ports = {name: (s["ports"][0]["host_ip"], s["ports"][0]["published"], s["ports"][0]["target"])
             for name, s in services.items()}
    assert ports == {
        "tgi": ("127.0.0.1", "8080", 80), "vllm": ("127.0.0.1", "8000", 8000),
        "aphrodite": ("127.0.0.1", "2242", 2242), "textgen": ("127.0.0.1", "5000", 5000),
        "llamacpp": ("127.0.0.1", "8081", 8080), "sglang": ("127.0.0.1", "30000", 30000),
        "vllm-cpu": ("127.0.0.1", "8000", 8000), "llamacpp-cpu": ("127.0.0.1", "8082", 8082),
        "transformers": ("127.0.0.1", "8090", 8090), "textgen-cpu": ("127.0.0.1", "5000", 5000),
    }


REFUSALS = [(slug, s) for slug, eng in ENGINES.items() for s in SETTINGS if refusal(eng, s)]


@pytest.mark.parametrize("slug", sorted({slug for slug, _ in REFUSALS}))
def test_unsupported_setting_is_refused_naming_the_engine(compose: Callable[..., Any], slug: str) -> None:
    """Every refused setting of one engine set at once (one `docker compose` each engine, not one
    each setting): compose's one error line names each, as it names one set alone."""
    settings = [setting for s, setting in REFUSALS if s == slug]
    env = {f"{slug.upper().replace('-', '_')}_{setting}": "1" if setting != "HOST" else "127.0.0.1"
           for setting in settings}
    result = compose("config", "--quiet", env=env)
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for (var, value), setting in zip(env.items(), settings):
        assert f"{slug} does not support {var}" in result.stderr, (var, result.stderr)
        with pytest.raises(SettingError, match=f"^{slug} does not support {setting} \\({var}\\)"):
            translate(slug, {setting: value})


def test_refused_setting_left_empty_is_fine(config: Callable[[dict[str, str]], dict[str, Any]]) -> None:
    services = config({"TEXTGEN_DTYPE": "", "VLLM_MAX_INPUT_TOKENS": ""})["services"]
    assert services["textgen"]["command"][-2:] == ["--model", "tiny-llama.gguf"]


def test_hf_token_reaches_containers_by_name_only(config: Callable[[dict[str, str]], dict[str, Any]]) -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    assert "HF_TOKEN:" not in text and "HF_TOKEN=" not in text
    services = config({"HF_TOKEN": "hf_not_a_real_token"})["services"]
    for slug, service in services.items():
        assert "HF_TOKEN" in service["environment"], slug
        assert "hf_not_a_real_token" not in " ".join(service["command"]), slug


def test_healthchecks_probe_each_engines_readiness_path(config: Callable[[dict[str, str]], dict[str, Any]]) -> None:
    services = config({"VLLM_CPU_PORT": "8100"})["services"]
    urls = {name: s["healthcheck"]["test"][-1] for name, s in services.items()}
    assert urls["tgi"] == "http://127.0.0.1:80/health"
    assert urls["llamacpp"] == "http://127.0.0.1:8080/health"
    assert "http://127.0.0.1:8000/health" in urls["vllm"]
    assert "http://127.0.0.1:2242/health" in urls["aphrodite"]
    assert "http://127.0.0.1:5000/v1/models" in urls["textgen"]
    assert "http://127.0.0.1:30000/health" in urls["sglang"]
    assert "http://127.0.0.1:8100/health" in urls["vllm-cpu"]
    assert "http://127.0.0.1:8090/health" in urls["transformers"]
    assert "http://127.0.0.1:8082/health" in urls["llamacpp-cpu"]


@pytest.mark.parametrize(
    ("slug", "settings", "message"),
    [
        ("tgi", {"GPUS": "0,5"}, "tgi: GPUS names GPU 5 but this host has 4 GPU(s)"),
        ("tgi", {"GPUS": "0,0"}, "tgi: GPUS lists a GPU twice"),
        ("vllm", {"GPUS": "gpu0"}, "vllm: GPUS must be GPU indexes"),
        ("vllm", {"SHARDS": "2", "GPUS": "1"}, "vllm: SHARDS=2 needs 2 GPUs but GPUS lists 1"),
        ("sglang", {"GPU_MEMORY_FRACTION": "1.5"}, "sglang: GPU_MEMORY_FRACTION must be a number in (0, 1]"),
        ("tgi", {"DTYPE": "half"}, "tgi: DTYPE must be one of float16, bfloat16"),
        ("vllm", {"MAX_TOTAL_TOKENS": "4k"}, "vllm: MAX_TOTAL_TOKENS must be a whole number"),
        ("vllm", {"MODEL": "a b"}, "vllm: MODEL must be one word"),
        ("nope", {}, "unknown engine 'nope'"),
    ],
)
def test_validate_refuses_bad_values_in_one_line(slug: str, settings: dict[str, str], message: str) -> None:
    with pytest.raises(SettingError) as err:
        validate(slug, settings, gpu_count=4)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_env_example_as_env_renders_without_warnings(compose: Callable[..., Any], tmp_path: Path) -> None:
    env_file = tmp_path / "example.env"
    env_file.write_text((ROOT / ".env.example").read_text())
    result = compose("--env-file", str(env_file), "config", "--quiet")
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
