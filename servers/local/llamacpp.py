"""llama.cpp's llama-server on a GPU: the CUDA build of the same vendored tree as llamacpp-cpu
(`scripts/build_llamacpp.sh --cuda 90`), every layer on the GPU.

    RIG_LLAMA_SERVER    the binary (default: the newest build/llama.cpp/cuda-*/bin/llama-server)
    RIG_LLAMACPP_MODEL  the GGUF file (default models/tiny-llama.gguf); served under its stem

Slots and per-slot context are llamacpp-cpu's (one slot per user up to 128, 2048 tokens each),
so the two builds race with the same settings.
"""

from __future__ import annotations

import os
from pathlib import Path

from servers.llamacpp_cpu import DEFAULT_SLOTS, SLOT_TOKENS
from servers.local.recipe import REPO, LocalRecipe

__all__ = ["RECIPE"]

GGUF = Path(os.environ.get("RIG_LLAMACPP_MODEL", REPO / "models" / "tiny-llama.gguf"))


def _binary() -> Path:
    if os.environ.get("RIG_LLAMA_SERVER"):
        return Path(os.environ["RIG_LLAMA_SERVER"])
    builds = sorted((REPO / "build" / "llama.cpp").glob("cuda-*/bin/llama-server"))
    return builds[-1] if builds else REPO / "build" / "llama.cpp" / "cuda-90" / "bin" / "llama-server"


def command(port: int, extra_args: list[str]) -> list[str]:
    argv = [str(_binary()), "--model", str(GGUF), "--host", "127.0.0.1", "--port", str(port),
            "--alias", GGUF.stem, "--metrics", "--n-gpu-layers", "999"]
    defaults = {("--parallel", "-np"): str(DEFAULT_SLOTS), ("--kv-unified-per-slot",): str(SLOT_TOKENS)}
    for names, value in defaults.items():  # a flag given in extra_args replaces the default
        if not set(names) & set(extra_args):
            argv += [names[0], value]
    return argv + list(extra_args)


def missing() -> str | None:
    if not _binary().exists():
        return f"no CUDA llama-server at {_binary()}: run scripts/build_llamacpp.sh --cuda ARCH"
    if not GGUF.exists():
        return f"no model at {GGUF}: set RIG_LLAMACPP_MODEL to a GGUF file"
    return None


RECIPE = LocalRecipe(slug="llamacpp", command=command, missing=missing, model_name=GGUF.stem)
