"""Hugging Face transformers' own server, ``transformers serve --continuous-batching``, on CPU.

The image is built locally from servers/transformers-cpu/ by scripts/build_images.sh. MODEL is
the command's positional argument: the server is pinned to it, answers requests for that exact
name (the path as given, e.g. ``/models/tiny-llama``) and refuses any other with HTTP 400, so
there is no served-model-name. A batch step is bounded in tokens (``--cb-max-batch-tokens``,
like vLLM's ``--max-num-batched-tokens``), not in requests; the KV cache is fixed at
``--cb-num-blocks`` blocks of 256 tokens, since on CPU the server would otherwise take 90% of
the host's RAM. It listens on ``HOST``:``PORT`` inside the container, like vllm-cpu.
"""

from servers.engine import Engine

__all__ = ["ENGINE", "IMAGE", "TRANSFORMERS_VERSION"]

TRANSFORMERS_VERSION = "5.23.0"  # = scripts/install.sh transformers_version
IMAGE = f"llm-load-rig/transformers-cpu:{TRANSFORMERS_VERSION}"
_NO_FLAG = "transformers serve has no flag for it"

ENGINE = Engine(
    slug="transformers",
    image=IMAGE,
    image_source=f"built here by scripts/build_images.sh (pip transformers[serving]=={TRANSFORMERS_VERSION}, "
                 "torch 2.13.0+cpu)",
    host_port=8090,
    container_port=None,
    args=("--continuous-batching", "--device", "cpu", "--cb-num-blocks", "512",
          "--host", "{HOST}", "--port", "{PORT}"),
    arg_defaults={"HOST": "0.0.0.0", "PORT": "8090"},
    flags={
        "MODEL": ("{}",),
        "DTYPE": ("--dtype", "{}"),
        "MAX_BATCH_PREFILL_TOKENS": ("--cb-max-batch-tokens", "{}"),
    },
    refused={
        "SERVED_MODEL_NAME": "transformers serve names the model by MODEL as given, a path or hub id, "
                             "and clients send that",
        "QUANTIZE": "transformers serve quantizes only with bitsandbytes on CUDA (--quantization bnb-4bit), "
                    "which this CPU image lacks",
        "SPECULATE": _NO_FLAG,
        "MAX_TOTAL_TOKENS": f"{_NO_FLAG}; the model's max_position_embeddings bounds prompt + output",
        "MAX_INPUT_TOKENS": _NO_FLAG,
        "MAX_CONCURRENT_REQUESTS": "transformers serve bounds a batch in tokens, not requests: set "
                                   "MAX_BATCH_PREFILL_TOKENS (--cb-max-batch-tokens); each running "
                                   "request takes one token of it per step",
        "SHARDS": "the CPU image runs on one device",
        "GPU_MEMORY_FRACTION": "the CPU image has no GPU; its KV cache is --cb-num-blocks blocks of 256 "
                               "tokens, which TRANSFORMERS_EXTRA_ARGS can set",
    },
    defaults={
        "MODEL": "/models/tiny-llama",
        "DTYPE": "bfloat16",
        "MAX_BATCH_PREFILL_TOKENS": "512",
    },
    gpu=False,
    service={
        "build": {"context": "servers/transformers-cpu", "network": "host"},
        "pull_policy": "never",
    },
)
