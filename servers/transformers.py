"""Hugging Face transformers' own server, ``transformers serve --continuous-batching``, on CPU.

The image is built locally from servers/transformers-cpu/ by scripts/build_images.sh. MODEL is
the command's positional argument: the server is pinned to it, answers requests for that exact
name (the path as given, e.g. ``/models/tiny-llama``) and refuses any other with HTTP 400, so
there is no served-model-name. A batch step is bounded in tokens (``--cb-max-batch-tokens``,
like vLLM's ``--max-num-batched-tokens``), not in requests; the KV cache is fixed at
``--cb-num-blocks`` blocks of 256 tokens, since on CPU the server would otherwise take 90% of
the host's RAM. It listens on ``HOST``:``PORT`` inside the container, like vllm-cpu.

Locally (``RECIPE``) it runs from its own venv (.venv-transformers):

    RIG_TRANSFORMERS_PYTHON  the interpreter (default .venv-transformers/bin/python; on a GPU
                             machine with transformers preinstalled: python3)
    RIG_TRANSFORMERS_DEVICE  cpu (default) | cuda | cuda:N
    RIG_TRANSFORMERS_MODEL   the model folder (default models/tiny-llama)

Its /v1/models lists the hub cache instead of the pinned model (HTTP 500 when there is none),
so the rig learns the name from the 400 that refuses another (loadtest/client/probe.py); locally
the name is the absolute path. On a GPU it sizes its cache from free memory. Continuous batching
starts with the first request (about 3 s on 2 cores), not at health.
"""

import os
from pathlib import Path

from loadtest.toolkit.repo import REPO
from servers.engine import Engine
from servers.spec import EngineSpec, LocalRecipe, PrefixCache, Target

__all__ = ["BATCH_TOKENS", "DEVICE", "ENGINE", "ENGINE_PYTHON", "IMAGE", "RECIPE", "SPEC", "TINY_MODEL",
           "TRANSFORMERS_VERSION"]

TRANSFORMERS_VERSION = "5.23.0"  # = scripts/install.sh transformers_version
IMAGE = f"llm-load-rig/transformers-cpu:{TRANSFORMERS_VERSION}"
_NO_FLAG = "transformers serve has no flag for it"

ENGINE = Engine(
    slug="transformers",
    image=IMAGE,
    image_source=f"built here by scripts/build_images.sh (pip transformers[serving]=={TRANSFORMERS_VERSION}, "
                 "torch 2.13.0+cpu)",
    host_port=8090,
    container_port=None,
    args=("--continuous-batching", "--device", "cpu", "--cb-num-blocks", "512",
          "--host", "{HOST}", "--port", "{PORT}"),
    arg_defaults={"HOST": "0.0.0.0", "PORT": "8090"},
    flags={
        "MODEL": ("{}",),
        "DTYPE": ("--dtype", "{}"),
        "MAX_BATCH_PREFILL_TOKENS": ("--cb-max-batch-tokens", "{}"),
    },
    refused={
        "SERVED_MODEL_NAME": "transformers serve names the model by MODEL as given, a path or hub id, "
                             "and clients send that",
        "QUANTIZE": "transformers serve quantizes only with bitsandbytes on CUDA (--quantization bnb-4bit), "
                    "which this CPU image lacks",
        "SPECULATE": _NO_FLAG,
        "MAX_TOTAL_TOKENS": f"{_NO_FLAG}; the model's max_position_embeddings bounds prompt + output",
        "MAX_INPUT_TOKENS": _NO_FLAG,
        "MAX_CONCURRENT_REQUESTS": "transformers serve bounds a batch in tokens, not requests: set "
                                   "MAX_BATCH_PREFILL_TOKENS (--cb-max-batch-tokens); each running "
                                   "request takes one token of it per step",
        "SHARDS": "the CPU image runs on one device",
        "GPU_MEMORY_FRACTION": "the CPU image has no GPU; its KV cache is --cb-num-blocks blocks of 256 "
                               "tokens, which TRANSFORMERS_EXTRA_ARGS can set",
    },
    defaults={
        "MODEL": "/models/tiny-llama",
        "DTYPE": "bfloat16",
        "MAX_BATCH_PREFILL_TOKENS": "512",
    },
    gpu=False,
    service={
        "build": {"context": "servers/transformers-cpu", "network": "host"},
        "pull_policy": "never",
        # tini as PID 1 hands Docker's SIGTERM on: transformers serve as PID 1 let
        # `docker compose down` wait out its whole timeout (20 s in the container tests)
        "init": True,
    },
)

ENGINE_PYTHON = Path(os.environ.get("RIG_TRANSFORMERS_PYTHON",
                                    REPO / ".venv-transformers" / "bin" / "python"))
DEVICE = os.environ.get("RIG_TRANSFORMERS_DEVICE", "cpu")


def model_folder() -> Path:
    """RIG_TRANSFORMERS_MODEL as it is when the engine starts (the race's answers leg sets it
    for one start), else the tiny model."""
    return Path(os.environ.get("RIG_TRANSFORMERS_MODEL", REPO / "models" / "tiny-llama")).resolve()


TINY_MODEL = model_folder()
# Tokens one batch step may hold (prefill chunks + one per decoding request): 128 users decode
# together with room left for prefill. Setting MAX_BATCH_PREFILL_TOKENS overrides it.
BATCH_TOKENS = 512
CPU_KV_BLOCKS = 512  # x 256 tokens: 128 users x 1024 tokens; 512 MiB for the tiny model


def command(port: int, extra_args: list[str]) -> list[str]:
    cache = ["--cb-num-blocks", str(CPU_KV_BLOCKS)] if DEVICE == "cpu" else []
    return [str(ENGINE_PYTHON), "-m", "transformers.cli.transformers", "serve", str(model_folder()),
            "--continuous-batching", "--device", DEVICE, "--dtype", "bfloat16",
            "--host", "127.0.0.1", "--port", str(port),
            "--cb-max-batch-tokens", str(BATCH_TOKENS), *cache, *extra_args]


def missing() -> str | None:
    if not ENGINE_PYTHON.exists():
        return f"no transformers venv at {ENGINE_PYTHON}: run scripts/install.sh"
    if not (model_folder() / "config.json").exists():
        return f"no model at {model_folder()}: run scripts/install.sh"
    return None


RECIPE = LocalRecipe(
    slug="transformers", command=command, missing=missing, model_name=str(TINY_MODEL),
    env={"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1",
         "HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1"},
    # 200 once the pinned model is loaded (it loads before the server listens); 503 if the
    # continuous-batching worker has died.
    health_path="/health",
)

SPEC = EngineSpec(
    slug="transformers",
    container=ENGINE,
    target=Target(ENGINE.host_port, ignore_eos_as="generation_config", pinned_model=True),
    local=RECIPE,
    metrics_none="transformers serve has no Prometheus endpoint",
    prefix_cache=PrefixCache(None, "transformers serve shares cached prefix blocks "
                                   "(allow_block_sharing, on by default) but its only reset, "
                                   "POST /reset, unloads the model"),
)
