"""oobabooga text-generation-webui with its OpenAI API, on its llama.cpp loader: a GGUF file under
``/models`` (the mounted MODELS_DIR), named by file name, every layer on the GPU.

The flags are those of commit 1dcde41d03d1 (``modules/shared.py``; ``modules/llama_cpp_server.py``
hands each to the ``llama-server`` it starts), the commit ``textgen-cpu`` runs: MAX_CONCURRENT_REQUESTS
is its ``--parallel`` (llama-server slots; upstream's default 1 holds its generation lock, one
request at a time) and SPECULATE its draftless n-gram speculation. ``--n-gpu-layers`` is the
spelling both that commit and the 2024 image accept. What the loader has no flag for, or takes
from the GGUF, is refused with the reason; its ``--ctx-size`` is the total over its slots, as for
``textgen-cpu``.

It is counted as ``textgen-cpu`` is (``TARGET``, shared): its API listens on HOST:PORT and its
llama-server, started with ``--metrics`` (``--extra-flags metrics``), on 127.0.0.1:PORT + 5 inside
the container, where the rig reads ``llamacpp:tokens_predicted_total`` before and after a run
(``loadtest/telemetry/output_counter.py``): with host networking (a sweep's ``network: host``) the
rig reaches it; on published ports only the API is published, and runs stay on its re-tokenized
usage, flagged ``unequal_work``.

The pinned 2024 image predates that loader (its llama.cpp ran in-process, without a llama-server)
and ``--extra-flags``, ``--parallel`` and ``--spec-type``: it stops at its argument parser; run it
with ``TEXTGEN_IMAGE`` set to an image of 1dcde41d03d1.

Locally on a GPU host (``RECIPE``) it is that commit's API in front of the ``llamacpp`` engine's
own CUDA llama-server and GGUF, every layer on the GPU, with the same slots and per-slot context,
so the two race on the same binary and file. Installed there without a network (docs/gpus.md):
``scripts/gpu_bundle.sh install ... --name textgen --target DIR`` and
``scripts/install_textgen.sh --into DIR``; then

    RIG_TEXTGEN_PYTHON   DIR/python (default .venv-textgen/bin/python)
    RIG_TEXTGEN_SOURCE   its source (default build/textgen)
    RIG_LLAMA_SERVER, RIG_LLAMACPP_MODEL   as for the llamacpp engine (servers/llamacpp.py)
    RIG_TEXTGEN_LOADER   its loader (default llama.cpp); ExLlamav3 or ExLlamav3_HF serve an EXL3
                         folder (scripts/convert_exl3.sh) with the exllamav3 bundle installed
                         into DIR too; the Compose service always runs llama.cpp
    RIG_TEXTGEN_MODEL    that EXL3 folder (default models/llama3-8b-exl3-4.0)

On ExLlamav3 its ``--ctx-size`` is one cache of that many tokens shared by every request at once
(the same total as llama.cpp's slots); docs/textgen.md says how it serves several.
"""

import os
from pathlib import Path

from loadtest.toolkit.repo import REPO
from servers import llamacpp
from servers.engine import Engine
from servers.llamacpp_cpu import DEFAULT_SLOTS, SLOT_TOKENS, with_defaults
from servers.spec import EngineSpec, LocalRecipe, PrefixCache, Target
from servers.vllm import _importable, _nvidia_gpu

__all__ = ["BOOT", "ENGINE", "EXL3_LOADERS", "EXL3_NEW_TOKENS", "INNER_PORT_OFFSET", "LOADERS", "PREDICTED_TOKENS", "PYTHON",
           "RECIPE", "SOURCE", "SPEC", "TARGET", "api_command", "flag"]

INNER_PORT_OFFSET = 5  # its llama-server listens on the API port + 5 when that port is free
PREDICTED_TOKENS = "llamacpp:tokens_predicted_total"  # its llama-server's count of tokens generated
# exllamav3's count on the ExLlamav3 loader, which has no llama-server: the sum of each finished
# job's new_tokens, served on the same port by the boot shim (servers/textgen-cpu/exl3_counter.py)
EXL3_NEW_TOKENS = "exllamav3:new_tokens_total"
_GGUF = "its llama.cpp loader takes it from the GGUF file chosen as MODEL"

ENGINE = Engine(
    slug="textgen",
    image="atinoda/text-generation-webui:default-nvidia-snapshot-2024-02-04",
    image_source="versioned tag shown in the Atinoda README; newer versioned tags not verified",
    host_port=5000,
    container_port=None,  # it listens on HOST:PORT inside, so host networking reaches its llama-server too
    args=("python3", "/app/server.py", "--api", "--listen", "--listen-host", "{HOST}", "--api-port", "{PORT}",
          "--model-dir", "/models", "--loader", "llama.cpp", "--n-gpu-layers", "999", "--extra-flags", "metrics"),
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
    arg_defaults={"HOST": "0.0.0.0", "PORT": "5000"},
    health_path="/v1/models",
    cache_dir="/root/.cache/huggingface",
    service={"init": True},
)

# How the client drives and counts text-generation-webui, on any loader and device (textgen-cpu too):
# --ignore-eos is its ban_eos_token; its stream opens with an empty chunk before it generates, which
# is not a token; its usage re-tokenizes the answer, so a run's output tokens are the change of its
# loader's counter: its llama-server's, or exllamav3's (ExLlamav3_HF has none: usage, unequal_work).
TARGET = Target(ENGINE.host_port, ignore_eos_as="ban_eos_token", empty_chunk_is_token=False,
                output_tokens_counter=((PREDICTED_TOKENS, EXL3_NEW_TOKENS), INNER_PORT_OFFSET))

# Where scripts/install_textgen.sh puts it, on any device
SOURCE = Path(os.environ.get("RIG_TEXTGEN_SOURCE", REPO / "build" / "textgen"))
PYTHON = Path(os.environ.get("RIG_TEXTGEN_PYTHON", REPO / ".venv-textgen" / "bin" / "python"))
BOOT = REPO / "servers" / "textgen-cpu" / "boot.py"
INSTALL = "run scripts/install_textgen.sh"


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def api_command(port: int, defaults: dict[tuple[str, ...], str], extra_args: list[str]) -> list[str]:
    """server.py's API under boot.py with ``defaults`` (flag spellings -> value), each replaced
    by a flag in ``extra_args``; the llama.cpp loader's ``--ctx-size`` is its slots' total."""
    argv = [str(PYTHON), str(BOOT), str(SOURCE), "--nowebui", "--api", "--api-port", str(port)]
    if (flag(extra_args, "--loader") or defaults.get(("--loader",))) == "llama.cpp":
        slots = int(flag(extra_args, "--parallel") or defaults.get(("--parallel",), DEFAULT_SLOTS))
        defaults = {**defaults, ("--ctx-size", "--n_ctx"): str(slots * SLOT_TOKENS)}
    return [arg for arg in with_defaults(argv, defaults, extra_args) if arg]


def missing_source() -> str | None:
    if not (SOURCE / "server.py").exists():
        return f"no text-generation-webui source at {SOURCE}: {INSTALL}"
    if not PYTHON.exists():
        return f"no {PYTHON}: {INSTALL}"
    return None


# The loaders of 1dcde41d03d1 (modules/loaders.py's loaders_and_params), as server.py's --loader takes them
LOADERS = ("llama.cpp", "Transformers", "ExLlamav3_HF", "ExLlamav3", "TensorRT-LLM")
EXL3_LOADERS = ("ExLlamav3", "ExLlamav3_HF")
EXL3_MODEL = REPO / "models" / "llama3-8b-exl3-4.0"


def loader() -> str:
    return os.environ.get("RIG_TEXTGEN_LOADER") or "llama.cpp"


def exl3_model() -> Path:
    return Path(os.environ.get("RIG_TEXTGEN_MODEL") or EXL3_MODEL).expanduser().absolute()


def command(port: int, extra_args: list[str]) -> list[str]:
    if loader() in EXL3_LOADERS:
        model = exl3_model()
        return api_command(port, {("--loader",): loader(), ("--model-dir",): str(model.parent),
                                  ("--model",): model.name,
                                  ("--ctx-size", "--n_ctx", "--max_seq_len"): str(DEFAULT_SLOTS * SLOT_TOKENS)},
                           extra_args)
    gguf = llamacpp.GGUF
    return api_command(port, {("--loader",): "llama.cpp", ("--model-dir",): str(gguf.parent),
                              ("--model",): gguf.name, ("--gpu-layers", "--n-gpu-layers"): "999",
                              ("--parallel",): str(DEFAULT_SLOTS), ("--extra-flags",): "metrics"},
                       extra_args)


def _missing_exl3() -> str | None:
    model = exl3_model()
    if not (model / "config.json").is_file():
        return (f"no EXL3 model at {model}: set RIG_TEXTGEN_MODEL to a folder scripts/convert_exl3.sh "
                "wrote")
    if not _nvidia_gpu():
        return f"no NVIDIA GPU here (NVML and nvidia-smi found none): textgen's {loader()} loader runs on a GPU"
    if not _importable(str(PYTHON), "exllamav3"):
        return (f"exllamav3 is not installed for {PYTHON}: scripts/gpu_bundle.sh install ... --name exllamav3 "
                "--target DIR, the folder textgen's bundle went into (docs/textgen.md)")
    return None


def missing() -> str | None:
    name = loader()
    if name not in LOADERS:
        return (f"RIG_TEXTGEN_LOADER {name!r}: not a loader of text-generation-webui 1dcde41d03d1 "
                f"({', '.join(LOADERS)})")
    if name != "llama.cpp" and name not in EXL3_LOADERS:
        return (f"RIG_TEXTGEN_LOADER {name!r}: the local GPU recipe runs llama.cpp, "
                f"{' or '.join(EXL3_LOADERS)}")
    return missing_source() or (_missing_exl3() if name in EXL3_LOADERS else llamacpp.RECIPE.missing())


# Its loader finds llama-server through the llama_cpp_binaries shim, which reads RIG_LLAMA_SERVER.
RECIPE = LocalRecipe(slug="textgen", command=command, missing=missing, model_name=llamacpp.GGUF.stem,
                     health_path=ENGINE.health_path, env={"RIG_LLAMA_SERVER": str(llamacpp.binary())})

SPEC = EngineSpec(
    slug="textgen",
    container=ENGINE,
    target=TARGET,
    local=RECIPE,
    metrics_none="text-generation-webui's API has no Prometheus endpoint (its llama-server's is on "
                 f"the API port + {INNER_PORT_OFFSET})",
    prefix_cache=PrefixCache(None, "text-generation-webui's cache belongs to its loader and has "
                                   "no endpoint to empty it"),
)
