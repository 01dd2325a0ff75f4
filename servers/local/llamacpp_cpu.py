"""llama.cpp's llama-server on CPU, the binary built by scripts/build_llamacpp.sh.

Flags from the rig's settings (``--parallel``, ``--kv-unified-per-slot``; servers/llamacpp_cpu.py)
replace these defaults. The server sizes its KV pool (--ctx-size) to slots x tokens per
slot, so a sweep over --parallel needs no --ctx-size of its own.
"""

from __future__ import annotations

import os
from pathlib import Path

from servers.llamacpp_cpu import DEFAULT_SLOTS, SLOT_TOKENS
from servers.local.recipe import REPO, LocalRecipe

__all__ = ["GGUF", "LLAMA_SERVER", "RECIPE"]

LLAMA_SERVER = Path(os.environ.get("RIG_LLAMACPP_CPU_BINARY", REPO / "build" / "llama.cpp" / "cpu" / "bin" / "llama-server"))
GGUF = REPO / "models" / "tiny-llama.gguf"
MODEL_NAME = "tiny-llama"


def _threads() -> int:
    """One core is left to the HTTP threads and the rig's client on the same machine: ggml's
    compute threads meet at a barrier every op, so one preempted thread stalls them all (on 2
    shared cores, 2 threads ran the 64 x 32-token workload 2-5x slower than 1)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cpus - 1)


def command(port: int, extra_args: list[str]) -> list[str]:
    threads = str(_threads())
    defaults = {("--threads", "-t"): threads, ("--threads-batch", "-tb"): threads,
                ("--parallel", "-np"): str(DEFAULT_SLOTS), ("--kv-unified-per-slot",): str(SLOT_TOKENS)}
    argv = [str(LLAMA_SERVER), "--model", str(GGUF), "--host", "127.0.0.1", "--port", str(port),
            "--alias", MODEL_NAME, "--metrics"]
    for names, value in defaults.items():  # a flag given in extra_args replaces the default
        if not set(names) & set(extra_args):
            argv += [names[0], value]
    return argv + list(extra_args)


def missing() -> str | None:
    if not LLAMA_SERVER.exists():
        return f"no llama-server at {LLAMA_SERVER}: run scripts/build_llamacpp.sh"
    if not GGUF.exists():
        return f"no model at {GGUF}: run scripts/build_llamacpp.sh"
    return None


RECIPE = LocalRecipe(slug="llamacpp-cpu", command=command, missing=missing, model_name=MODEL_NAME)
