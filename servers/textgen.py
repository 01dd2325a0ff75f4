"""oobabooga text-generation-webui with its OpenAI API (Atinoda image), API port 5000, on its
llama.cpp loader: a GGUF file under ``/models`` (the mounted MODELS_DIR), named by file name.

The settings map to that loader's own ``server.py`` flags, as text-generation-webui 1dcde41d03d1
names them (``modules/shared.py``; ``modules/llama_cpp_server.py`` hands each to the llama-server
it starts): MAX_CONCURRENT_REQUESTS is its ``--parallel`` (llama-server slots; upstream's default 1
holds its generation lock, one request at a time) and SPECULATE its draftless n-gram speculation.
Every layer goes on the GPU (``--n-gpu-layers``, the spelling both that commit and the 2024 image
accept). What the loader has no flag for, or takes from the GGUF, is refused with the reason; its
``--ctx-size`` is the total over its slots, as for ``textgen-cpu``. ``--parallel`` and
``--spec-type`` are newer than the pinned 2024 image: with either set, use an image of that commit
(``TEXTGEN_IMAGE``).
"""

from servers.engine import Engine
from servers.spec import EngineSpec, PrefixCache, Target

__all__ = ["ENGINE", "SPEC"]

_GGUF = "its llama.cpp loader takes it from the GGUF file chosen as MODEL"

ENGINE = Engine(
    slug="textgen",
    image="atinoda/text-generation-webui:default-nvidia-snapshot-2024-02-04",
    image_source="versioned tag shown in the Atinoda README; newer versioned tags not verified",
    host_port=5000,
    container_port=5000,
    args=("python3", "/app/server.py", "--api", "--listen", "--api-port", "5000", "--model-dir", "/models",
          "--loader", "llama.cpp", "--n-gpu-layers", "999"),
    flags={
        "MODEL": ("--model", "{}"),
        "MAX_CONCURRENT_REQUESTS": ("--parallel", "{}"),
        "SPECULATE": ("--spec-type", "ngram-simple", "--draft-max", "{}"),
    },
    refused={
        "SERVED_MODEL_NAME": "text-generation-webui ignores the model name in requests",
        "DTYPE": _GGUF,
        "QUANTIZE": _GGUF,
        "MAX_TOTAL_TOKENS": "its llama.cpp loader's --ctx-size is the total split over the --parallel slots; "
                            "pass --ctx-size SLOTS*TOKENS in TEXTGEN_EXTRA_ARGS",
        "MAX_INPUT_TOKENS": "llama.cpp has no prompt-only limit",
        "MAX_BATCH_PREFILL_TOKENS": "its --batch-size is llama.cpp's, not a prefill budget; "
                                    "pass it in TEXTGEN_EXTRA_ARGS",
        "SHARDS": "its llama.cpp loader splits layers over every GPU in TEXTGEN_GPUS; "
                  "set the shares with --tensor-split in TEXTGEN_EXTRA_ARGS",
        "GPU_MEMORY_FRACTION": "its llama.cpp loader has no memory fraction; its --fit-target is a margin "
                               "in MiB, used only without --n-gpu-layers",
    },
    defaults={"MODEL": "tiny-llama.gguf"},
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
