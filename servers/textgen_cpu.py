"""text-generation-webui's API on CPU (``server.py --nowebui --api``), at commit 1dcde41d03d1,
in front of the rig's own llama-server.

Installed by scripts/install_textgen.sh: the source under build/textgen/ (from the vendored
tarball; AGPL-3.0, never copied into this repository), .venv-textgen with its API's PyPI
requirements, and a ``llama_cpp_binaries`` shim through which its llama.cpp loader starts
build/llama.cpp/cpu/bin/llama-server, the same binary as the ``llamacpp-cpu`` engine, on the same
GGUF. That loader starts one llama-server of its own on the API port + 5 (``--extra-flags``
reach it; ``--metrics`` is given, so its ``/metrics`` and ``/slots`` can be read there) and
forwards each request to it.

Two loaders, chosen by the extra arguments:

    python -m loadtest.local_engine start --engine textgen-cpu --port 5000 --pidfile P
    python -m loadtest.local_engine start --engine textgen-cpu --port 5000 --pidfile P \\
        -- --loader Transformers        # models/tiny-llama on CPU torch (install --transformers)

Concurrency is the loader's: text-generation-webui holds a generation lock around each request
unless the llama.cpp loader runs more than one slot (``--parallel``), so the recipe gives it the
llamacpp-cpu engine's slots and per-slot context (``--ctx-size`` is the total, split over the
slots); ``-- --parallel 1`` is upstream's default, one request at a time. The Transformers
loader always serves one at a time. Under that lock, more than 40 streams at once deadlock it
for good: each waits for the lock on one of anyio's 40 worker threads, and the holder's stream
needs a free one to go on (evidence/2026-11-25/textgen-cpu). Its servers run under
servers/textgen-cpu/boot.py, which ends the process with one ``error:`` line where upstream would
carry on on another port or without a model.

Its ``usage.completion_tokens`` is the answer's text re-tokenized, not the tokens generated
(a random-weight model's byte tokens re-tokenize to more); its llama-server's
``llamacpp:tokens_predicted_total`` counts what was generated, so a run's output tokens are that
counter's change over the run (``output_tokens_counter``), usage only where it cannot be read. Its stream
opens with an empty chunk before it generates, which is not a token (``empty_chunk_is_token``).
"""

from __future__ import annotations

from servers.engine import Engine
from servers.llamacpp_cpu import DEFAULT_SLOTS, GGUF, LLAMA_SERVER, SLOT_TOKENS, _threads
from servers.spec import EngineSpec, LocalRecipe, PrefixCache
from servers.textgen import BOOT, INNER_PORT_OFFSET, PREDICTED_TOKENS, SOURCE, TARGET
from servers.textgen import ENGINE as TEXTGEN
from servers.textgen import PYTHON as VENV_PYTHON
from servers.textgen import api_command, flag, missing_source
from servers.transformers import TINY_MODEL

__all__ = ["BOOT", "COMMIT", "ENGINE", "IMAGE", "INNER_PORT_OFFSET", "PREDICTED_TOKENS", "RECIPE", "SOURCE",
           "SPEC", "VENV_PYTHON", "command"]

COMMIT = "1dcde41d03d13fc768316f4d2256a8a6dd044268"  # = scripts/install_textgen.sh COMMIT
IMAGE = f"llm-load-rig/textgen-cpu:{COMMIT[:12]}"
_NOT_CPU = "textgen-cpu runs on CPU, every layer (--gpu-layers 0)"
_GGUF = "the llama.cpp loader takes it from the GGUF file chosen as MODEL"

ENGINE = Engine(
    slug="textgen-cpu",
    image=IMAGE,
    image_source=f"built here by scripts/build_images.sh: text-generation-webui {COMMIT[:12]} from the "
                 "vendored tarball, its API's PyPI requirements, the rig's llama-server",
    host_port=TEXTGEN.host_port,
    container_port=None,  # it listens on HOST:PORT inside, for host networking (CI) and published ports
    args=("--nowebui", "--api", "--listen", "--listen-host", "{HOST}", "--api-port", "{PORT}", "--model-dir", "/models",
          "--loader", "llama.cpp", "--gpu-layers", "0", "--extra-flags", "metrics",
          "--ctx-size", str(DEFAULT_SLOTS * SLOT_TOKENS)),
    flags={
        "MODEL": ("--model", "{}"),
        "MAX_CONCURRENT_REQUESTS": ("--parallel", "{}"),
        "SPECULATE": ("--spec-type", "ngram-simple", "--draft-max", "{}"),
    },
    refused={
        "SERVED_MODEL_NAME": "text-generation-webui answers under the loaded model's name, whatever is asked",
        "DTYPE": _GGUF,
        "QUANTIZE": _GGUF,
        "MAX_TOTAL_TOKENS": f"its --ctx-size is the total split over the --parallel slots "
                            f"({DEFAULT_SLOTS * SLOT_TOKENS} = {DEFAULT_SLOTS} x {SLOT_TOKENS}); "
                            "pass --ctx-size SLOTS*TOKENS in TEXTGEN_CPU_EXTRA_ARGS",
        "MAX_INPUT_TOKENS": "llama.cpp has no prompt-only limit",
        "MAX_BATCH_PREFILL_TOKENS": "its --batch-size is llama.cpp's, not a prefill budget; "
                                    "pass it in TEXTGEN_CPU_EXTRA_ARGS",
        "SHARDS": _NOT_CPU,
        "GPU_MEMORY_FRACTION": _NOT_CPU,
    },
    defaults={"MODEL": GGUF.name, "MAX_CONCURRENT_REQUESTS": str(DEFAULT_SLOTS)},
    health_path="/v1/internal/health",
    gpu=False,
    arg_defaults=dict(TEXTGEN.arg_defaults),  # HOST:PORT as the GPU service
    service={
        "build": {"context": "servers/textgen-cpu", "network": "host"},
        "pull_policy": "never",
    },
)


def command(port: int, extra_args: list[str]) -> list[str]:
    """server.py under boot.py on the tiny GGUF (or, with ``--loader Transformers``, the tiny
    model's folder on CPU torch); a flag in ``extra_args`` replaces the recipe's default."""
    if flag(extra_args, "--loader") == "Transformers":
        return api_command(port, {("--model-dir",): str(TINY_MODEL.parent), ("--model",): TINY_MODEL.name,
                                  ("--cpu",): ""}, extra_args)
    threads = str(_threads())
    return api_command(port, {("--loader",): "llama.cpp", ("--model-dir",): str(GGUF.parent), ("--model",): GGUF.name,
                              ("--gpu-layers",): "0", ("--threads",): threads, ("--threads-batch",): threads,
                              ("--parallel",): str(DEFAULT_SLOTS), ("--extra-flags",): "metrics"}, extra_args)


def missing() -> str | None:
    if problem := missing_source():
        return problem
    if not LLAMA_SERVER.exists():
        return f"no llama-server at {LLAMA_SERVER}: run scripts/build_llamacpp.sh"
    if not GGUF.exists():
        return f"no model at {GGUF}: run scripts/build_llamacpp.sh"
    return None


RECIPE = LocalRecipe(slug="textgen-cpu", command=command, missing=missing, model_name=GGUF.stem,
                     health_path=ENGINE.health_path)

SPEC = EngineSpec(
    slug="textgen-cpu",
    container=ENGINE,
    target=TARGET,
    local=RECIPE,
    metrics_none="text-generation-webui's API has no Prometheus endpoint (its llama-server's is on "
                 f"the API port + {INNER_PORT_OFFSET})",
    prefix_cache=PrefixCache(None, "text-generation-webui offers no endpoint to empty its "
                                   "loader's cache"),
)
