"""llama.cpp's llama-server (CUDA image), port 8080 passed explicitly.

The model is a GGUF file under ``/models`` (the mounted MODELS_DIR); its
quantization and dtype live in the file. ``--ctx-size`` is shared by all
slots, so it is not the per-request MAX_TOTAL_TOKENS and is refused as such.
"""

from servers.engine import Engine

__all__ = ["ENGINE"]

ENGINE = Engine(
    slug="llamacpp",
    image="ghcr.io/ggml-org/llama.cpp:server-cuda-b11206",
    image_source="build b11206, pinned by digest in other public projects",
    host_port=8081,
    container_port=8080,
    args=("--host", "0.0.0.0", "--port", "8080", "--n-gpu-layers", "999", "--metrics"),
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
