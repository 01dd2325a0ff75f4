"""llama.cpp's llama-server (CUDA image), port 8080 passed explicitly.

The model is a GGUF file under ``/models`` (the mounted MODELS_DIR); its
quantization and dtype live in the file. ``--ctx-size`` is shared by all
slots, so it is not the per-request MAX_TOTAL_TOKENS and is refused as such.

Locally (``RECIPE``) it is the CUDA build of llamacpp-cpu's vendored tree
(``scripts/build_llamacpp.sh --cuda 90``), every layer on the GPU, with llamacpp-cpu's slots and
per-slot context so the two builds race with the same settings:

    RIG_LLAMA_SERVER    the binary (default: the newest build/llama.cpp/cuda-*/bin/llama-server)
    RIG_LLAMACPP_MODEL  the GGUF file (default models/tiny-llama.gguf); served under its stem
"""

import os
import tempfile
from pathlib import Path

from loadtest.toolkit.repo import REPO
from servers.engine import Engine
from servers.llamacpp_cpu import (DEFAULT_SLOTS, LLAMACPP_METRICS, NO_HOST_PROMPT_CACHE, PREFIX_CACHE, SLOT_TOKENS,
                                  with_defaults)
from servers.spec import EngineSpec, LocalRecipe, Target

__all__ = ["ENGINE", "GGUF", "RECIPE", "SPEC", "binary"]

GGUF = Path(os.environ.get("RIG_LLAMACPP_MODEL", REPO / "models" / "tiny-llama.gguf"))

ENGINE = Engine(
    slug="llamacpp",
    image="ghcr.io/ggml-org/llama.cpp:server-cuda-b11206",
    image_source="build b11206, pinned by digest in other public projects",
    host_port=8081,
    container_port=8080,
    args=("--host", "0.0.0.0", "--port", "8080", "--n-gpu-layers", "999", "--metrics",
          "--slot-save-path", "/tmp", *NO_HOST_PROMPT_CACHE),
    flags={
        "MODEL": ("--model", "{}"),
        "SERVED_MODEL_NAME": ("--alias", "{}"),
        "MAX_CONCURRENT_REQUESTS": ("--parallel", "{}"),
    },
    refused={
        "DTYPE": "llama.cpp takes the dtype from the GGUF file",
        "QUANTIZE": "llama.cpp takes the quantization from the GGUF file",
        "SPECULATE": "llama.cpp speculates with a draft model; pass --model-draft in LLAMACPP_EXTRA_ARGS",
        "MAX_TOTAL_TOKENS": "llama.cpp's --ctx-size is shared by all slots; pass it in LLAMACPP_EXTRA_ARGS",
        "MAX_INPUT_TOKENS": "llama.cpp has no prompt-only limit",
        "MAX_BATCH_PREFILL_TOKENS": "llama.cpp's --batch-size is not a prefill budget; pass it in LLAMACPP_EXTRA_ARGS",
        "SHARDS": "llama.cpp splits layers over every GPU in LLAMACPP_GPUS",
        "GPU_MEMORY_FRACTION": "llama.cpp has no memory fraction flag",
    },
    defaults={"MODEL": "/models/model.gguf"},
    health_cmd="curl",
)


def binary() -> Path:
    if os.environ.get("RIG_LLAMA_SERVER"):
        return Path(os.environ["RIG_LLAMA_SERVER"])
    builds = sorted((REPO / "build" / "llama.cpp").glob("cuda-*/bin/llama-server"))
    return builds[-1] if builds else REPO / "build" / "llama.cpp" / "cuda-90" / "bin" / "llama-server"


def command(port: int, extra_args: list[str]) -> list[str]:
    argv = [str(binary()), "--model", str(GGUF), "--host", "127.0.0.1", "--port", str(port),
            "--alias", GGUF.stem, "--metrics", "--n-gpu-layers", "999",
            "--slot-save-path", tempfile.gettempdir()]
    defaults = {("--parallel", "-np"): str(DEFAULT_SLOTS), ("--kv-unified-per-slot",): str(SLOT_TOKENS),
                ("--cache-ram", "-cram"): NO_HOST_PROMPT_CACHE[1]}
    return with_defaults(argv, defaults, extra_args)


def missing() -> str | None:
    if not binary().exists():
        return f"no CUDA llama-server at {binary()}: run scripts/build_llamacpp.sh --cuda ARCH"
    if not GGUF.exists():
        return f"no model at {GGUF}: set RIG_LLAMACPP_MODEL to a GGUF file"
    return None


# llama-server reads any of its flags from LLAMA_ARG_* variables as well
RECIPE = LocalRecipe(slug="llamacpp", command=command, missing=missing, model_name=GGUF.stem,
                     env_prefixes=("LLAMA_ARG_", "CUDA_VISIBLE_DEVICES"))

SPEC = EngineSpec(
    slug="llamacpp",
    container=ENGINE,
    target=Target(ENGINE.host_port, regex_as="grammar", lora_as="lora"),
    local=RECIPE,
    metrics=LLAMACPP_METRICS,
    prefix_cache=PREFIX_CACHE,
)
