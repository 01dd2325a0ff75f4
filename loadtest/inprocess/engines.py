"""The in-process engines: which venv runs each, its model, its variants, what it can batch.

An engine is named on the command line as SLUG or SLUG:VARIANT (`ctranslate2:int8`,
`transformers-generate:streamer`); the variant becomes the run's `flags`, so that the same
engine with other options is another cell, as a server's flags are.

Standard library only (scripts ask it before anything is installed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ENGINES", "InprocEngine", "REPO", "SpecError", "parse_spec"]

REPO = Path(__file__).resolve().parents[2]
TINY_MODEL = REPO / "models" / "tiny-llama"
TINY_GGUF = REPO / "models" / "tiny-llama.gguf"
LIBLLAMA = REPO / "build" / "llama.cpp" / "cpu" / "bin"  # beside llama-server, from its build


class SpecError(ValueError):
    """An engine name or variant this rig does not know; the message is one line."""


@dataclass(frozen=True)
class InprocEngine:
    """`variants`: name -> (adapter options, flags recorded); the first is the default.
    `batches`: whether it runs more than one sequence at a time. `server`: the local server of
    the same engine and model (servers/local/), for the server-overhead comparison."""

    slug: str
    adapter: str
    python: Path
    model: Path
    variants: dict[str, tuple[dict[str, Any], str]]
    batches: bool
    install: str
    streams: str  # how TTFT is taken, for the docs and the table
    server: str = ""
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
        "transformers-generate", "transformers",
        Path(os.environ.get("RIG_TRANSFORMERS_PYTHON", REPO / ".venv-transformers/bin/python")),
        TINY_MODEL, {"": ({"streamer": False}, ""), "streamer": ({"streamer": True}, "--streamer")},
        batches=True, install="scripts/install.sh",
        streams=":streamer, a streamer's put() per step; without, none (e2e only)",
        server="transformers", env=_HF_ENV),
    InprocEngine(
        "vllm-offline", "vllm-offline",
        Path(os.environ.get("RIG_ENGINE_PYTHON", REPO / ".venv-vllm/bin/python")),
        TINY_MODEL, {"": ({}, ""), "eager": ({"enforce_eager": True}, "--enforce-eager")},
        batches=True, install="scripts/install.sh",
        streams="each engine step's new tokens (RequestOutputKind.DELTA)", server="vllm-cpu",
        env={**_HF_ENV, "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_NO_USAGE_STATS": "1"}),
    InprocEngine(
        "ctranslate2", "ctranslate2",
        Path(os.environ.get("RIG_TRANSFORMERS_PYTHON", REPO / ".venv-transformers/bin/python")),
        TINY_MODEL,
        {"float32": ({"compute_type": "float32"}, "--compute-type float32"),
         "int8": ({"compute_type": "int8"}, "--compute-type int8")},
        batches=True, install="scripts/install_inprocess.sh ctranslate2",
        streams="batch 1: generate_tokens; batches: generate_batch's per-token callback",
        env=_HF_ENV),
    InprocEngine(
        "llama-cpp-python", "llama-cpp-python", REPO / ".venv/bin/python", TINY_GGUF,
        {"": ({}, "")}, batches=False, install="scripts/install_inprocess.sh llama-cpp-python",
        streams="each token Llama.generate yields", server="llamacpp-cpu"),
)}


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
