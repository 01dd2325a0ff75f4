"""SGLang 0.5.17 as a local GPU engine (servers/sglang.py's RECIPE): its command, environment and
refusals, read on CPU, never run."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import servers.vllm
from servers import sglang
from servers.bundle.recipes import RECIPES
from servers.prefix_cache import reset_prefix_cache, sglang_flush
from servers.registry import SPECS, translate
from servers.settings import env_name
from servers.vllm import HOST_PYTHON, gpu_recipe

PORT = 30123
VALUES = {"MODEL": "/models/llama3-8b", "SERVED_MODEL_NAME": "llama3-8b", "DTYPE": "bfloat16",
          "QUANTIZE": "fp8", "MAX_TOTAL_TOKENS": "4096", "MAX_BATCH_PREFILL_TOKENS": "8192",
          "MAX_CONCURRENT_REQUESTS": "256", "SHARDS": "2", "GPU_MEMORY_FRACTION": "0.85",
          "GPUS": "0,1", "EXTRA_ARGS": "--attention-backend fa3"}


def _recipe(**settings: str):
    env = {env_name("sglang", name): value for name, value in settings.items()}
    return gpu_recipe(sglang.ENGINE, sglang.ENGINE.flags, env=env, launch=sglang.LAUNCH)


def test_every_setting_gives_the_compose_services_flag_after_the_fixed_part() -> None:
    argv = _recipe(**VALUES).command(PORT, ["--max-running-requests", "64"])
    fixed = [HOST_PYTHON, "-m", "sglang.launch_server", "--host", "127.0.0.1", "--port", str(PORT),
             "--enable-metrics", "--attention-backend", "triton", "--sampling-backend", "pytorch"]
    assert argv[:len(fixed)] == fixed
    compose = translate("sglang", VALUES)
    assert compose[:len(sglang.ENGINE.args)] == list(sglang.ENGINE.args)
    assert "--attention-backend" not in sglang.ENGINE.args, "the Compose image has SGLang whole"
    assert argv[len(fixed):-2] == compose[len(sglang.ENGINE.args):]
    assert argv[-2:] == ["--max-running-requests", "64"]  # a sweep's flags come last and win
    assert ["--mem-fraction-static", "0.85"] == argv[argv.index("--mem-fraction-static"):][:2]


def test_the_bundles_flags_come_before_the_settings_so_extra_args_override_them() -> None:
    """The bundle leaves out FlashAttention 3's ops (RECIPES["sglang"]): Triton's attention and
    PyTorch's sampler by default; argparse keeps the last --attention-backend, SGLANG_EXTRA_ARGS's."""
    argv = _recipe(EXTRA_ARGS="--attention-backend fa3").command(PORT, [])
    backends = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--attention-backend"]
    assert backends == ["triton", "fa3"]
    assert argv[8:12] == list(RECIPES["sglang"].engine_args)


def test_gpus_python_and_the_rigs_own_settings_leave_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """SGLang reads SGLANG_PORT as the base of its internal ports: the .env's 30000 must not reach it."""
    monkeypatch.setenv("SGLANG_PORT", "30000")
    env = {"SGLANG_GPUS": "1", "RIG_SGLANG_PYTHON": "/opt/rig/sglang/python"}
    recipe = gpu_recipe(sglang.ENGINE, sglang.ENGINE.flags, env=env, launch=sglang.LAUNCH)
    argv = recipe.command(PORT, [])
    assert argv[:4] == ["env", "-u", "SGLANG_PORT", "/opt/rig/sglang/python"]
    assert recipe.env == {"HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                          "CUDA_VISIBLE_DEVICES": "1"}
    assert recipe.front_ends == ("-m sglang.launch_server",)


@pytest.mark.parametrize("setting", ["SPECULATE", "MAX_INPUT_TOKENS"])
def test_what_the_compose_service_refuses_is_refused_in_one_line(setting: str, tmp_path: Path) -> None:
    why = _recipe(MODEL=str(tmp_path), **{setting: "2"}).missing()
    assert why == f"sglang does not support {setting} (SGLANG_{setting}): {sglang.ENGINE.refused[setting]}"


def test_refusals_here_name_the_gpu_then_the_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(servers.vllm, "_nvidia_gpu", lambda: False)
    assert _recipe().missing() == "no NVIDIA GPU here (NVML and nvidia-smi found none): sglang runs on a GPU host"
    monkeypatch.setattr(servers.vllm, "_nvidia_gpu", lambda: True)
    why = _recipe().missing()
    assert why and why.startswith(f"sglang is not installed for {HOST_PYTHON}") and "--target DIR" in why
    monkeypatch.setattr(servers.vllm, "_importable", lambda python, package: package == "sglang")
    assert "no model at" in (_recipe(MODEL=str(tmp_path / "none")).missing() or "")


def test_the_spec_carries_the_recipe_its_metrics_and_flush_cache() -> None:
    spec = SPECS["sglang"]
    assert spec.local is sglang.RECIPE and spec.prefix_cache.reset is sglang_flush
    assert spec.metrics and spec.metrics["running"] == ["sglang:num_running_reqs"]
    assert sglang.RECIPE.health_path == "/health"


class _FlushCache(BaseHTTPRequestHandler):
    """SGLang 0.5.17's POST /flush_cache (sglang/srt/entrypoints/http_server.py): a text answer,
    200 when flushed, 400 with its message when refused (requests still running)."""
    refuse = False

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        refused = type(self).refuse
        body = (b"Flush cache failed.\n" if refused else
                b"Cache flushed.\nPlease check backend logs for more details. (When there are running "
                b"or waiting requests, the operation will not be performed.)\n")
        self.send_response(400 if refused else 200 if self.path == "/flush_cache" else 404)
        self.send_header("content-type", "text/plain; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("refuse, said", [(False, "reset: POST /flush_cache"),
                                          (True, "failed: HTTP 400 from")])
def test_flush_cache_answered_in_text_is_a_reset_and_a_400_a_failed_one(refuse: bool, said: str) -> None:
    """Its answer is text, not JSON: read as JSON, every flush of the 8B race's SGLang runs was
    recorded as failed (prefix_cache_not_reset) while SGLang's log said "Cache flushed"."""
    handler = type("Handler", (_FlushCache,), {"refuse": refuse})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        assert reset_prefix_cache(url, SPECS["sglang"]).startswith(said)
    finally:
        server.shutdown()
        server.server_close()
