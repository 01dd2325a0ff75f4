"""CTranslate2 in-process: a model converted by CTranslate2's own converter, run by
`ctranslate2.Generator`: on CPU, the tiny model (`scripts/install_inprocess.sh ctranslate2` writes
models/ct2/tiny-llama-float32 and models/ct2/tiny-llama-int8); on a GPU host, its own model folder
(`RIG_CT2_MODEL`), converted there by `python -m loadtest.inprocess.ct2 MODEL COMPUTE_TYPE`.

Options: `compute_type` (the precision the model was converted at, loaded with the same compute
type: float32 or int8 on CPU, bfloat16, float16 or int8_bfloat16 on a GPU) and `device` (`cpu`,
the default, or `cuda`). Prompts are tokenized with the model's own tokenizer.json
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
import sys
import time
from pathlib import Path
from typing import Any, Callable

from loadtest.inprocess.stamps import Missing, Stamps

__all__ = ["Adapter", "COMPUTE_TYPES", "DEVICES", "convert", "converted_model", "main"]

COMPUTE_TYPES = ("float32", "int8", "bfloat16", "float16", "int8_bfloat16")
DEVICES = ("cpu", "cuda")
INSTALL = "scripts/install_inprocess.sh ctranslate2"
CONVERT = "python -m loadtest.inprocess.ct2 MODEL COMPUTE_TYPE"


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
        device = options.get("device", "cpu")
        if compute_type not in COMPUTE_TYPES or device not in DEVICES:
            raise Missing(f"compute_type {compute_type!r} on {device!r}: one of "
                          f"{', '.join(COMPUTE_TYPES)} on one of {', '.join(DEVICES)}")
        path = converted_model(model, compute_type)
        if not (path / "model.bin").exists():
            raise Missing(f"no CTranslate2 model at {path}: run {INSTALL if device == 'cpu' else CONVERT}")
        self.tokenizer = Tokenizer.from_file(str(Path(model) / "tokenizer.json"))
        self.generator = ctranslate2.Generator(str(path), device=device, compute_type=compute_type,
                                               intra_threads=threads or os.cpu_count() or 1)
        self.version = ctranslate2.__version__
        self.settings = {"compute_type": compute_type, "device": device, "intra_threads": threads,
                         "model": str(path)}

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


def convert(model: str, compute_type: str) -> Path:
    """`model` (a Hugging Face folder) converted at `compute_type` by CTranslate2's own converter,
    to converted_model()'s folder; the folder already there is kept."""
    import ctranslate2.converters

    out = converted_model(model, compute_type)
    if not (out / "model.bin").exists():
        ctranslate2.converters.TransformersConverter(model).convert(str(out), quantization=compute_type,
                                                                   force=True)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in COMPUTE_TYPES or not (Path(argv[0]) / "config.json").exists():
        print(f"error: give a model folder (with config.json) and a compute type "
              f"({', '.join(COMPUTE_TYPES)}): {CONVERT}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        out = convert(*argv)
    except ImportError as exc:
        print(f"error: this Python has no CTranslate2 converter ({exc}): run {INSTALL}, or the "
              "ctranslate2 bundle's python on a GPU host", file=sys.stderr)
        return 2
    print(f"converted {argv[0]} to {out} ({argv[1]}) in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
