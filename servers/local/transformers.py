"""Hugging Face transformers' own server (`transformers serve --continuous-batching`), from its
own venv (.venv-transformers).

The model is pinned as the command's positional argument: the server then answers every request
with it, and a request naming any other model gets HTTP 400 ("Server is pinned to 'X'"). Its
/v1/models lists the Hugging Face hub cache instead (HTTP 500 when there is none), so the rig
learns the name from that 400 (loadtest/client/probe.py). The name is the path as given here, absolute.

    RIG_TRANSFORMERS_PYTHON  the interpreter (default .venv-transformers/bin/python; on a GPU
                             machine with transformers preinstalled: python3)
    RIG_TRANSFORMERS_DEVICE  cpu (default) | cuda | cuda:N
    RIG_TRANSFORMERS_MODEL   the model folder (default models/tiny-llama)

On CPU the KV cache is sized here (TRANSFORMERS_CPU_KV_BLOCKS blocks of 256 tokens): left to
itself the server takes 90% of the host's RAM. On a GPU it sizes its cache from free memory.
Continuous batching starts with the first request (about 3 s on 2 cores), not at health.
"""

from __future__ import annotations

import os
from pathlib import Path

from servers.local.recipe import REPO, LocalRecipe

__all__ = ["BATCH_TOKENS", "DEVICE", "ENGINE_PYTHON", "RECIPE", "TINY_MODEL"]

ENGINE_PYTHON = Path(os.environ.get("RIG_TRANSFORMERS_PYTHON",
                                    REPO / ".venv-transformers" / "bin" / "python"))
DEVICE = os.environ.get("RIG_TRANSFORMERS_DEVICE", "cpu")
TINY_MODEL = Path(os.environ.get("RIG_TRANSFORMERS_MODEL", REPO / "models" / "tiny-llama")).resolve()
# Tokens one batch step may hold (prefill chunks + one per decoding request): 128 users decode
# together with room left for prefill. Setting MAX_BATCH_PREFILL_TOKENS overrides it.
BATCH_TOKENS = 512
CPU_KV_BLOCKS = 512  # x 256 tokens: 128 users x 1024 tokens; 512 MiB for the tiny model


def command(port: int, extra_args: list[str]) -> list[str]:
    cache = ["--cb-num-blocks", str(CPU_KV_BLOCKS)] if DEVICE == "cpu" else []
    return [str(ENGINE_PYTHON), "-m", "transformers.cli.transformers", "serve", str(TINY_MODEL),
            "--continuous-batching", "--device", DEVICE, "--dtype", "bfloat16",
            "--host", "127.0.0.1", "--port", str(port),
            "--cb-max-batch-tokens", str(BATCH_TOKENS), *cache, *extra_args]


def missing() -> str | None:
    if not ENGINE_PYTHON.exists():
        return f"no transformers venv at {ENGINE_PYTHON}: run scripts/install.sh"
    if not (TINY_MODEL / "config.json").exists():
        return f"no model at {TINY_MODEL}: run scripts/install.sh"
    return None


RECIPE = LocalRecipe(
    slug="transformers", command=command, missing=missing, model_name=str(TINY_MODEL),
    env={"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1",
         "HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1"},
    # 200 once the pinned model is loaded (it loads before the server listens); 503 if the
    # continuous-batching worker has died.
    health_path="/health",
)
