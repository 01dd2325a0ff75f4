"""vLLM on CPU (the embedded default engine), from its own venv (.venv-vllm)."""

from __future__ import annotations

import os
from pathlib import Path

from servers.local.recipe import REPO, LocalRecipe

__all__ = ["ENGINE_PYTHON", "RECIPE", "TINY_MODEL"]

ENGINE_PYTHON = Path(os.environ.get("RIG_ENGINE_PYTHON", REPO / ".venv-vllm" / "bin" / "python"))
TINY_MODEL = REPO / "models" / "tiny-llama"
KV_CACHE_GIB = 2


def command(port: int, extra_args: list[str]) -> list[str]:
    return [str(ENGINE_PYTHON), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(TINY_MODEL), "--served-model-name", TINY_MODEL.name,
            "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16",
            "--max-model-len", "2048", *extra_args]


def missing() -> str | None:
    if not ENGINE_PYTHON.exists():
        return f"no engine venv at {ENGINE_PYTHON}: run scripts/install.sh"
    if not (TINY_MODEL / "config.json").exists():
        return f"no model at {TINY_MODEL}: run scripts/install.sh"
    return None


RECIPE = LocalRecipe(
    slug="vllm-cpu", command=command, missing=missing, model_name=TINY_MODEL.name,
    env={"VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB), "VLLM_NO_USAGE_STATS": "1",
         "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1",
         # uvicorn's default (5 s) closes a kept-alive connection whose request a busy API server
         # has not read in time; the client then sees a request fail with no answer.
         "VLLM_HTTP_TIMEOUT_KEEP_ALIVE": "600"},
    # vLLM binds its compute (OpenMP) threads itself, one per listed core.
    bind_compute=lambda cpus: {"VLLM_CPU_OMP_THREADS_BIND": cpus},
)
