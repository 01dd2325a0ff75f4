"""SGLang (lmsysorg/sglang), port 30000.

SGLang's own ``--max-total-tokens`` is the KV pool size, so the rig's
per-request MAX_TOTAL_TOKENS maps to ``--context-length`` instead.
"""

from servers.engine import Engine
from servers.prefix_cache import sglang_flush
from servers.spec import EngineSpec, PrefixCache, Target

__all__ = ["ENGINE", "SPEC"]

ENGINE = Engine(
    slug="sglang",
    image="lmsysorg/sglang:v0.5.18",
    image_source="v0.5.18, on Docker Hub per other public projects",
    host_port=30000,
    container_port=30000,
    args=("python3", "-m", "sglang.launch_server", "--host", "0.0.0.0", "--port", "30000", "--enable-metrics"),
    flags={
        "MODEL": ("--model-path", "{}"),
        "SERVED_MODEL_NAME": ("--served-model-name", "{}"),
        "DTYPE": ("--dtype", "{}"),
        "QUANTIZE": ("--quantization", "{}"),
        "MAX_TOTAL_TOKENS": ("--context-length", "{}"),
        "MAX_BATCH_PREFILL_TOKENS": ("--max-prefill-tokens", "{}"),
        "MAX_CONCURRENT_REQUESTS": ("--max-running-requests", "{}"),
        "SHARDS": ("--tp-size", "{}"),
        "GPU_MEMORY_FRACTION": ("--mem-fraction-static", "{}"),
    },
    refused={
        "SPECULATE": "SGLang speculates with a draft model or EAGLE heads; pass --speculative-* in SGLANG_EXTRA_ARGS",
        "MAX_INPUT_TOKENS": "SGLang has no prompt-only limit; MAX_TOTAL_TOKENS (--context-length) bounds prompt + output",
    },
    defaults={"MODEL": "Qwen/Qwen2.5-0.5B-Instruct"},
    service={"ipc": "host", "ulimits": {"memlock": -1, "stack": 67108864}},
)

SPEC = EngineSpec(
    slug="sglang",
    container=ENGINE,
    target=Target(ENGINE.host_port, regex_as="regex"),
    metrics={"running": ["sglang:num_running_reqs"], "waiting": ["sglang:num_queue_reqs"],
             "kv_cache": ["sglang:token_usage"], "queue_time": [],
             "ttft": ["sglang:time_to_first_token_seconds"],
             "e2e": ["sglang:e2e_request_latency_seconds"],
             # a gauge: the radix cache's recent hit rate, a fraction
             "prefix_hit_rate": ["sglang:cache_hit_rate"]},
    prefix_cache=PrefixCache(sglang_flush),
)
