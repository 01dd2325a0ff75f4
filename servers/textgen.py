"""oobabooga text-generation-webui with its OpenAI API (Atinoda image), API port 5000.

Models are folders under ``/models`` (the mounted MODELS_DIR), named by folder,
not hub id. The loader decides batching: the Transformers loader serves one
request at a time, so the rig's concurrency and length settings are refused
rather than mapped to flags that mean something else per loader.
"""

from servers.engine import Engine
from servers.spec import EngineSpec, PrefixCache, Target

__all__ = ["ENGINE", "SPEC"]

_LOADER = "text-generation-webui has no loader-independent flag for this; pass the loader's flag in TEXTGEN_EXTRA_ARGS"

ENGINE = Engine(
    slug="textgen",
    image="atinoda/text-generation-webui:default-nvidia-snapshot-2024-02-04",
    image_source="versioned tag shown in the Atinoda README; newer versioned tags not verified",
    host_port=5000,
    container_port=5000,
    args=("python3", "/app/server.py", "--api", "--listen", "--api-port", "5000", "--model-dir", "/models"),
    flags={"MODEL": ("--model", "{}")},
    refused={
        "SERVED_MODEL_NAME": "text-generation-webui ignores the model name in requests",
        "DTYPE": _LOADER,
        "QUANTIZE": _LOADER,
        "SPECULATE": _LOADER,
        "MAX_TOTAL_TOKENS": _LOADER,
        "MAX_INPUT_TOKENS": _LOADER,
        "MAX_BATCH_PREFILL_TOKENS": _LOADER,
        "MAX_CONCURRENT_REQUESTS": _LOADER,
        "SHARDS": _LOADER,
        "GPU_MEMORY_FRACTION": _LOADER,
    },
    defaults={"MODEL": "tiny-llama"},
    health_path="/v1/models",
    cache_dir="/root/.cache/huggingface",
    service={"init": True},
)

SPEC = EngineSpec(
    slug="textgen",
    container=ENGINE,
    target=Target(ENGINE.host_port),
    metrics_none="text-generation-webui has no Prometheus endpoint",
    prefix_cache=PrefixCache(None, "text-generation-webui's cache belongs to its loader and has "
                                   "no endpoint to empty it"),
)
