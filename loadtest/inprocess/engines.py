"""The in-process engines, one table: which venv runs each, its adapter module, its model, its
variants, what it can batch, and the server engine (a spec slug, servers/registry.py) it pairs with.

An engine is named on the command line as SLUG or SLUG:VARIANT (`ctranslate2:int8`,
`transformers-generate:streamer`); the variant becomes the run's `flags`, so that the same
engine with other options is another cell, as a server's flags are. The worker imports the
adapter named here (worker.py), and `rig overhead`'s pairs are read from it (`PAIRS`);
tests/test_inprocess_table.py checks it against the engine specs.

Standard library only (scripts ask it before anything is installed; the worker imports it in
the engine's venv).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtest.toolkit.repo import REPO

__all__ = ["ADAPTERS", "ENGINES", "PAIRS", "InprocEngine", "SpecError", "parse_spec"]

TINY_MODEL = REPO / "models" / "tiny-llama"
TINY_GGUF = REPO / "models" / "tiny-llama.gguf"
LIBLLAMA = REPO / "build" / "llama.cpp" / "cpu" / "bin"  # beside llama-server, from its build


class SpecError(ValueError):
    """An engine name or variant this rig does not know; the message is one line."""


@dataclass(frozen=True)
class InprocEngine:
    """`adapter`: the module whose `Adapter` drives the library (loadtest/inprocess/, imported
    by the worker in the engine's venv). `variants`: name -> (adapter options, flags recorded);
    the first is the default. `batches`: whether it runs more than one sequence at a time.
    `server`: the engine spec (servers/registry.py) with a local recipe that serves the same
    engine and model. `pair`: its name in `rig overhead --pairs` where that server runs the same
    engine build with the same settings, so that the difference is the server's own cost;
    empty where the server takes another path through the library (transformers serve's
    continuous batching against `model.generate`)."""

    slug: str
    adapter: str
    python: Path
    model: Path
    variants: dict[str, tuple[dict[str, Any], str]]
    batches: bool
    install: str
    streams: str  # how TTFT is taken, for the docs and the table
    server: str = ""
    pair: str = ""
    env: dict[str, str] = field(default_factory=dict)

    def missing(self) -> str | None:
        """Why it cannot run here, in one line naming the install step; None when it can."""
        if not self.python.exists():
            return f"no {_shown(self.python)} for {self.slug}: run {self.install}"
        if not self.model.exists():
            return f"no model at {_shown(self.model)} for {self.slug}: run {self.install}"
        return None

    def environment(self, engine_cpus: str) -> dict[str, str]:
        env = {**os.environ, **self.env, "PYTHONPATH": str(REPO)}
        if self.slug == "vllm-offline" and engine_cpus:
            env["VLLM_CPU_OMP_THREADS_BIND"] = engine_cpus  # as the server's recipe binds them
        if self.slug == "llama-cpp-python" and "LLAMA_CPP_LIB_PATH" not in os.environ \
                and (LIBLLAMA / "libllama.so").exists():
            env["LLAMA_CPP_LIB_PATH"] = str(LIBLLAMA)
        return env


def _shown(path: Path) -> str:
    """The path as a user finds it: relative to the checkout where it lies inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


_HF_ENV = {"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false"}

ENGINES: dict[str, InprocEngine] = {e.slug: e for e in (
    InprocEngine(
        "transformers-generate", "loadtest.inprocess.hf_generate",
        Path(os.environ.get("RIG_TRANSFORMERS_PYTHON", REPO / ".venv-transformers/bin/python")),
        # a GPU host's own model folder (RIG_TRANSFORMERS_MODEL), on its GPU with :cuda
        Path(os.environ.get("RIG_TRANSFORMERS_MODEL") or TINY_MODEL),
        {"": ({"streamer": False}, ""), "streamer": ({"streamer": True}, "--streamer"),
         "cuda": ({"streamer": True, "device": "cuda"}, "--device cuda --streamer")},
        batches=True, install="scripts/install.sh",
        streams=":streamer, a streamer's put() per step; without, none (e2e only)",
        server="transformers", env=_HF_ENV),
    InprocEngine(
        "vllm-offline", "loadtest.inprocess.vllm_offline",
        Path(os.environ.get("RIG_ENGINE_PYTHON", REPO / ".venv-vllm/bin/python")),
        TINY_MODEL, {"": ({}, ""), "eager": ({"enforce_eager": True}, "--enforce-eager")},
        batches=True, install="scripts/install.sh",
        streams="each engine step's new tokens (RequestOutputKind.DELTA)", server="vllm-cpu", pair="vllm",
        env={**_HF_ENV, "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_NO_USAGE_STATS": "1"}),
    InprocEngine(
        "ctranslate2", "loadtest.inprocess.ct2",
        # on a GPU host, the ctranslate2 bundle's TARGET/python (its cuBLAS on the library path)
        Path(os.environ.get("RIG_CT2_PYTHON") or os.environ.get("RIG_TRANSFORMERS_PYTHON")
             or REPO / ".venv-transformers/bin/python"),
        # a GPU host's own model folder (RIG_CT2_MODEL), converted there, on its GPU with :cuda*
        Path(os.environ.get("RIG_CT2_MODEL") or TINY_MODEL),
        {"float32": ({"compute_type": "float32"}, "--compute-type float32"),
         "int8": ({"compute_type": "int8"}, "--compute-type int8"),
         "cuda": ({"compute_type": "bfloat16", "device": "cuda"}, "--device cuda --compute-type bfloat16"),
         "cuda-int8": ({"compute_type": "int8_bfloat16", "device": "cuda"},
                       "--device cuda --compute-type int8_bfloat16")},
        batches=True, install="scripts/install_inprocess.sh ctranslate2",
        streams="batch 1: generate_tokens; batches: generate_batch's per-token callback",
        env=_HF_ENV),
    InprocEngine(
        "llama-cpp-python", "loadtest.inprocess.llamacpp_python", REPO / ".venv/bin/python", TINY_GGUF,
        {"": ({}, "")}, batches=False, install="scripts/install_inprocess.sh llama-cpp-python",
        streams="each token Llama.generate yields", server="llamacpp-cpu", pair="llamacpp"),
    # GPU only: the exllamav3 bundle's TARGET/python and an EXL3 folder (docs/gpus.md)
    InprocEngine(
        "exllamav3", "loadtest.inprocess.exl3",
        Path(os.environ.get("RIG_EXLLAMAV3_PYTHON") or REPO / ".venv-exllamav3/bin/python"),
        Path(os.environ.get("RIG_EXLLAMAV3_MODEL") or REPO / "models/tiny-llama-exl3"),
        {"": ({}, "")}, batches=True,
        install="scripts/gpu_bundle.sh install ... --name exllamav3 and scripts/convert_exl3.sh "
                "(docs/gpus.md); RIG_EXLLAMAV3_PYTHON=TARGET/python RIG_EXLLAMAV3_MODEL=EXL3_DIR",
        streams="each Generator.iterate() result carrying token ids", env=_HF_ENV),
)}

# The worker's modules, and `rig overhead`'s pairs: name -> (server slug, in-process slug).
ADAPTERS: frozenset[str] = frozenset(e.adapter for e in ENGINES.values())
PAIRS: dict[str, tuple[str, str]] = {e.pair: (e.server, e.slug) for e in ENGINES.values() if e.pair}


def parse_spec(spec: str) -> tuple[InprocEngine, str, dict[str, Any], str]:
    """SLUG[:VARIANT] -> (engine, variant, adapter options, flags); SpecError otherwise."""
    slug, _, variant = spec.partition(":")
    if slug not in ENGINES:
        raise SpecError(f"unknown in-process engine {slug!r}; one of: {', '.join(ENGINES)}")
    engine = ENGINES[slug]
    if not variant:
        variant = next(iter(engine.variants))
    if variant not in engine.variants:
        names = ", ".join(f"{slug}:{v}" if v else slug for v in engine.variants)
        raise SpecError(f"{slug} has no variant {variant!r}; one of: {names}")
    options, flags = engine.variants[variant]
    return engine, variant, dict(options), flags
