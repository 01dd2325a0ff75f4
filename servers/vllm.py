"""vLLM's OpenAI server (vllm/vllm-openai image), port 8000.

The model is given as ``--model X``: it works under both the old
``python3 -m vllm.entrypoints.openai.api_server`` entrypoint and the newer
``vllm serve`` one. N-gram speculation uses the dotted form of
``--speculative-config`` (``--speculative-config.method ngram ...``), because a
JSON value cannot be written inside a Compose ``${VAR:+...}`` expression.
"""

from servers.engine import Engine
from servers.prefix_cache import vllm_reset
from servers.spec import EngineSpec, MetricNames, PrefixCache, Target

__all__ = ["ENGINE", "SPEC", "VLLM_FLAGS", "VLLM_REFUSED", "vllm_metric_names"]

VLLM_FLAGS: dict[str, tuple[str, ...]] = {
    "MODEL": ("--model", "{}"),
    "SERVED_MODEL_NAME": ("--served-model-name", "{}"),
    "DTYPE": ("--dtype", "{}"),
    "QUANTIZE": ("--quantization", "{}"),
    "SPECULATE": (
        "--speculative-config.method", "ngram",
        "--speculative-config.num_speculative_tokens", "{}",
        "--speculative-config.prompt_lookup_max", "4",
    ),
    "MAX_TOTAL_TOKENS": ("--max-model-len", "{}"),
    "MAX_BATCH_PREFILL_TOKENS": ("--max-num-batched-tokens", "{}"),
    "MAX_CONCURRENT_REQUESTS": ("--max-num-seqs", "{}"),
    "SHARDS": ("--tensor-parallel-size", "{}"),
    "GPU_MEMORY_FRACTION": ("--gpu-memory-utilization", "{}"),
}

VLLM_REFUSED: dict[str, str] = {
    "MAX_INPUT_TOKENS": "vLLM has no prompt-only limit; MAX_TOTAL_TOKENS (--max-model-len) bounds prompt + output",
}

ENGINE = Engine(
    slug="vllm",
    image="vllm/vllm-openai:v0.26.0",
    image_source="vLLM 0.26.0 = vllm/vllm-openai:latest on 2026-07 (docker image inspect, jetson-ai-lab PR #420)",
    host_port=8000,
    container_port=8000,
    args=("--host", "0.0.0.0", "--port", "8000"),
    flags=VLLM_FLAGS,
    refused=VLLM_REFUSED,
    defaults={"MODEL": "Qwen/Qwen2.5-0.5B-Instruct"},
    # 1: vLLM's development endpoints, /reset_prefix_cache among them (off by default: they
    # include remote procedure calls, and BIND_ADDRESS may open the port)
    service={"ipc": "host", "environment": {"VLLM_SERVER_DEV_MODE": "${VLLM_SERVER_DEV_MODE:-0}"}},
)


def vllm_metric_names(prefix: str) -> MetricNames:
    """vLLM V1's Prometheus names under ``prefix`` (forks rename only the prefix). Prefix-cache
    hits and queries are counted in prompt tokens."""
    names = {"running": ["num_requests_running"], "waiting": ["num_requests_waiting"],
             "kv_cache": ["kv_cache_usage_perc", "gpu_cache_usage_perc"],
             "queue_time": ["request_queue_time_seconds"], "ttft": ["time_to_first_token_seconds"],
             "e2e": ["e2e_request_latency_seconds"],
             "prefix_hits": ["prefix_cache_hits_total"], "prefix_queries": ["prefix_cache_queries_total"]}
    return {field: [f"{prefix}:{name}" for name in found] for field, found in names.items()}


SPEC = EngineSpec(
    slug="vllm",
    container=ENGINE,
    target=Target(ENGINE.host_port, token_ids=True),
    metrics=vllm_metric_names("vllm"),
    prefix_cache=PrefixCache(vllm_reset),
)
