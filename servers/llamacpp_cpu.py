"""llama.cpp's llama-server on CPU, built here from the llama.cpp tree vendored in PyPI's
llama-cpp-python sdist (scripts/build_llamacpp.sh), serving models/tiny-llama.gguf.

The image (servers/llamacpp-cpu/Dockerfile) is the rig's local base plus the host-built static
binary; no registry is needed. Each of the ``--parallel`` slots gets ``--kv-unified-per-slot``
tokens of context (MAX_TOTAL_TOKENS, prompt + output, as vLLM's --max-model-len) and the server
sizes its KV pool (--ctx-size) to slots x that, so the two settings never contradict each other.
It listens on ``HOST``:``PORT`` inside the container, for host networking and published ports.
"""

from servers.engine import Engine

__all__ = ["DEFAULT_SLOTS", "ENGINE", "IMAGE", "LLAMA_CPP_PYTHON_SHA256", "LLAMA_CPP_PYTHON_VERSION", "SLOT_TOKENS"]

LLAMA_CPP_PYTHON_VERSION = "0.3.36"  # the sdist whose vendored llama.cpp is built
LLAMA_CPP_PYTHON_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"  # its PyPI sdist
IMAGE = f"llm-load-rig/llamacpp-cpu:{LLAMA_CPP_PYTHON_VERSION}"
DEFAULT_SLOTS = 128  # one slot per user up to 128 users: none waits for a free slot
SLOT_TOKENS = 2048  # per request (prompt + output), as vllm-cpu's --max-model-len

ENGINE = Engine(
    slug="llamacpp-cpu",
    image=IMAGE,
    image_source=f"built here by scripts/build_images.sh: llama-server from the llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} sdist",
    host_port=8082,
    container_port=None,
    args=("--host", "{HOST}", "--port", "{PORT}", "--metrics"),
    arg_defaults={"HOST": "0.0.0.0", "PORT": "8082"},
    flags={
        "MODEL": ("--model", "{}"),
        "SERVED_MODEL_NAME": ("--alias", "{}"),
        "MAX_TOTAL_TOKENS": ("--kv-unified-per-slot", "{}"),
        "MAX_CONCURRENT_REQUESTS": ("--parallel", "{}"),
    },
    refused={
        "DTYPE": "llama.cpp takes the dtype from the GGUF file",
        "QUANTIZE": "llama.cpp takes the quantization from the GGUF file",
        "SPECULATE": "llama.cpp speculates with a draft model; pass --model-draft in LLAMACPP_CPU_EXTRA_ARGS",
        "MAX_INPUT_TOKENS": "llama.cpp has no prompt-only limit",
        "MAX_BATCH_PREFILL_TOKENS": "llama.cpp's --batch-size is not a prefill budget; pass it in LLAMACPP_CPU_EXTRA_ARGS",
        "SHARDS": "llamacpp-cpu runs without GPUs; the rig does not shard it",
        "GPU_MEMORY_FRACTION": "llamacpp-cpu has no GPU",
    },
    defaults={
        "MODEL": "/models/tiny-llama.gguf",
        "SERVED_MODEL_NAME": "tiny-llama",
        "MAX_TOTAL_TOKENS": str(SLOT_TOKENS),
        "MAX_CONCURRENT_REQUESTS": str(DEFAULT_SLOTS),
    },
    health_cmd="curl",
    gpu=False,
    service={
        "build": {"context": "servers/llamacpp-cpu", "network": "host"},
        "pull_policy": "never",
    },
)
