"""CTranslate2 in-process: the tiny model converted by CTranslate2's own converter
(`scripts/install_inprocess.sh ctranslate2` writes models/ct2/tiny-llama-float32 and
models/ct2/tiny-llama-int8), run by `ctranslate2.Generator` on CPU.

Options: `compute_type` (`float32` or `int8`: the model converted at that precision, loaded
with the same compute type). Prompts are tokenized with the model's own tokenizer.json
(`tokenizers`), as CTranslate2 takes token strings. Greedy (`sampling_topk=1`), exactly
`max_tokens` tokens (`min_length` = `max_length`, prompt not counted); the count is the ids the
engine returned.

- batch 1: `generate_tokens`, CTranslate2's streaming API: each yielded step is stamped.
- batch B: `generate_batch` over waves of B prompts, with its per-token `callback` (called for
  every sequence at every step) stamping each sequence's tokens; all of a wave are sent when it
  starts, each is done when the call returns.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from loadtest.inprocess.stamps import Missing, Stamps

__all__ = ["Adapter", "COMPUTE_TYPES", "converted_model"]

COMPUTE_TYPES = ("float32", "int8")
INSTALL = "scripts/install_inprocess.sh ctranslate2"


def converted_model(model: str, compute_type: str) -> Path:
    """Where the converted model lives: models/ct2/<model folder>-<compute type>."""
    source = Path(model)
    return source.parent / "ct2" / f"{source.name}-{compute_type}"


class Adapter:
    def __init__(self, model: str, options: dict[str, Any], threads: int) -> None:
        try:
            import ctranslate2
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise Missing(f"ctranslate2 is not installed ({exc}): run {INSTALL}") from None
        compute_type = options.get("compute_type", "float32")
        if compute_type not in COMPUTE_TYPES:
            raise Missing(f"compute_type {compute_type!r}: one of {', '.join(COMPUTE_TYPES)}")
        path = converted_model(model, compute_type)
        if not (path / "model.bin").exists():
            raise Missing(f"no CTranslate2 model at {path}: run {INSTALL}")
        self.tokenizer = Tokenizer.from_file(str(Path(model) / "tokenizer.json"))
        self.generator = ctranslate2.Generator(str(path), device="cpu", compute_type=compute_type,
                                               intra_threads=threads or os.cpu_count() or 1)
        self.version = ctranslate2.__version__
        self.settings = {"compute_type": compute_type, "intra_threads": threads, "model": str(path)}

    def run(self, requests: list[dict[str, Any]], batch: int,
            emit: Callable[[dict[str, Any]], None]) -> None:
        if batch == 1:
            for request in requests:
                self._stream(request, emit)
            return
        for start in range(0, len(requests), batch):
            self._wave(requests[start:start + batch], emit)

    def _stream(self, request: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> None:
        stamps = Stamps(request)
        tokens = self.tokenizer.encode(request["text"]).tokens
        count = 0
        for _ in self.generator.generate_tokens(tokens, max_length=request["max_tokens"],
                                                min_length=request["max_tokens"], sampling_topk=1):
            stamps.output()
            count += 1
        emit(stamps.record(done_ns=time.perf_counter_ns(), prompt_tokens=len(tokens),
                           output_tokens=count, finish_reason="length"))

    def _wave(self, wave: list[dict[str, Any]], emit: Callable[[dict[str, Any]], None]) -> None:
        max_tokens = max(r["max_tokens"] for r in wave)
        stamps = [Stamps(r) for r in wave]
        prompts = [self.tokenizer.encode(r["text"]).tokens for r in wave]

        def callback(step: Any) -> bool:
            stamps[step.batch_id].output()
            return False

        results = self.generator.generate_batch(prompts, max_length=max_tokens,
                                                min_length=max_tokens, sampling_topk=1,
                                                include_prompt_in_result=False, callback=callback)
        done = time.perf_counter_ns()
        for stamp, prompt, result in zip(stamps, prompts, results):
            emit(stamp.record(done_ns=done, prompt_tokens=len(prompt),
                              output_tokens=len(result.sequences_ids[0]), finish_reason="length"))
