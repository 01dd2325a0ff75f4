"""Hugging Face Text Generation Inference: launcher flags, port 80 in its image."""

from servers.engine import Engine
from servers.spec import EngineSpec, PrefixCache, Target

__all__ = ["ENGINE", "SPEC"]

ENGINE = Engine(
    slug="tgi",
    image="ghcr.io/huggingface/text-generation-inference:3.3.7",
    image_source="newest tag in the TGI repo, v3.3.7 (2025-12-18); TGI is in maintenance mode",
    host_port=8080,
    container_port=80,
    args=("--hostname", "0.0.0.0", "--port", "80"),
    flags={
        "MODEL": ("--model-id", "{}"),
        "DTYPE": ("--dtype", "{}"),
        "QUANTIZE": ("--quantize", "{}"),
        "SPECULATE": ("--speculate", "{}"),
        "MAX_TOTAL_TOKENS": ("--max-total-tokens", "{}"),
        "MAX_INPUT_TOKENS": ("--max-input-tokens", "{}"),
        "MAX_BATCH_PREFILL_TOKENS": ("--max-batch-prefill-tokens", "{}"),
        "MAX_CONCURRENT_REQUESTS": ("--max-concurrent-requests", "{}"),
        "SHARDS": ("--num-shard", "{}"),
        "GPU_MEMORY_FRACTION": ("--cuda-memory-fraction", "{}"),
    },
    refused={
        "SERVED_MODEL_NAME": "TGI serves one model and accepts any model name in requests",
    },
    defaults={"MODEL": "Qwen/Qwen2.5-0.5B-Instruct"},
    # --quantize's values in TGI 3.x's launcher (vLLM's list churns between releases: unchecked)
    choices={"DTYPE": ("float16", "bfloat16"),
             "QUANTIZE": ("awq", "compressed-tensors", "eetq", "exl2", "gptq", "marlin", "bitsandbytes",
                          "bitsandbytes-nf4", "bitsandbytes-fp4", "fp8")},
    health_cmd="curl",
    cache_dir="/data",
    service={"shm_size": "1g"},
)

SPEC = EngineSpec(
    slug="tgi",
    container=ENGINE,
    target=Target(ENGINE.host_port, api="generate", apis=("generate", "chat")),
    metrics={"running": ["tgi_batch_current_size"], "waiting": ["tgi_queue_size"],
             "kv_cache": [], "queue_time": ["tgi_request_queue_duration"],
             "e2e": ["tgi_request_duration"]},
    prefix_cache=PrefixCache(None, "TGI 3.x caches prefixes but has no endpoint to empty the "
                                   "cache: restart the container"),
)
