"""SGLang (lmsysorg/sglang), port 30000.

SGLang's own ``--max-total-tokens`` is the KV pool size, so the rig's
per-request MAX_TOTAL_TOKENS maps to ``--context-length`` instead.

Locally (``RECIPE``, a GPU host without Docker) it is sglang 0.5.17, the newest release that pins
the lent machines' torch 2.11.0 (its kernels, sglang-kernel 0.4.5, link CUDA 13:
evidence/2026-11-28/sglang-pins), run by the Python that has it (``RIG_SGLANG_PYTHON``:
``scripts/gpu_bundle.sh install ... --name sglang --target DIR`` writes DIR/python) as
``python -m sglang.launch_server`` on 127.0.0.1 with ``--enable-metrics`` and the flags the
bundle needs for what it leaves out (``RECIPES["sglang"].engine_args``: Triton's attention and
PyTorch's sampler, before the settings' flags, so ``SGLANG_EXTRA_ARGS`` can override them where
SGLang is installed whole). The settings are the
Compose service's, read from the environment under the .env names (``SGLANG_MODEL``,
``SGLANG_GPUS``, ``SGLANG_GPU_MEMORY_FRACTION``, ...) and turned into the same flags, refused
settings refused alike (``servers.vllm.gpu_recipe`` reads them; the rig's SGLANG_* leave the
engine's environment, since SGLang reads SGLANG_PORT as the first of its internal ports).
"""

from servers.bundle.recipes import RECIPES
from servers.engine import Engine
from servers.prefix_cache import sglang_flush
from servers.spec import EngineSpec, PrefixCache, Target
from servers.vllm import Launch, gpu_recipe

__all__ = ["ENGINE", "LAUNCH", "RECIPE", "SPEC"]

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



def _head(python: str, port: int) -> list[str]:
    return [python, "-m", "sglang.launch_server", "--host", "127.0.0.1", "--port", str(port),
            "--enable-metrics", *RECIPES["sglang"].engine_args]


# its HTTP server and tokenizer are the launch_server process itself; the scheduler and the
# detokenizer name themselves sglang::scheduler, sglang::detokenizer
LAUNCH = Launch(_head, {"HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "1"}, ("-m sglang.launch_server",))
RECIPE = gpu_recipe(ENGINE, ENGINE.flags, launch=LAUNCH)

SPEC = EngineSpec(
    slug="sglang",
    container=ENGINE,
    target=Target(ENGINE.host_port, regex_as="regex"),
    local=RECIPE,
    metrics={"running": ["sglang:num_running_reqs"], "waiting": ["sglang:num_queue_reqs"],
             "kv_cache": ["sglang:token_usage"], "queue_time": [],
             "ttft": ["sglang:time_to_first_token_seconds"],
             "e2e": ["sglang:e2e_request_latency_seconds"],
             # a gauge: the radix cache's recent hit rate, a fraction
             "prefix_hit_rate": ["sglang:cache_hit_rate"]},
    prefix_cache=PrefixCache(sglang_flush),
)
