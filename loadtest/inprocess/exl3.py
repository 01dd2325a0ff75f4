"""ExLlamaV3 in-process: an EXL3 model folder (scripts/convert_exl3.sh) on the GPU, run by
exllamav3's dynamic `Generator` (its job queue), in the exllamav3 bundle's interpreter
(TARGET/python of `scripts/gpu_bundle.sh install ... --name exllamav3`; docs/gpus.md).

Batch B is a closed loop like B users of a server: B jobs in the generator, the next enqueued
as soon as one finishes; exllamav3 batches the jobs it holds at each step. Greedy
(`ArgmaxSampler`), exactly `max_tokens` tokens: no stop conditions and `min_new_tokens` =
`max_new_tokens`. Each `Generator.iterate()` result of the streaming stage that carries token
ids is one output event, stamped when iterate returns; the count is those ids, checked against
the job's own `new_tokens` at its end. Prompts are encoded by exllamav3's tokenizer with BOS
(as its chat examples do for a Llama). A prompt's pages stay cached for the next job with the
same prompt (exllamav3's default), as a server's prefix cache keeps them.

Options: `cache_tokens` (the paged cache's size in tokens; default 256 jobs of 1,024 tokens),
`max_chunk_size` (prefill chunk, exllamav3's default 2048). A batch whose jobs would not all fit
in the cache at once is refused: exllamav3 would run fewer at a time, and the row would name a
batch it never ran.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from loadtest.inprocess.stamps import Missing, Stamps

__all__ = ["Adapter", "PAGE", "cache_tokens"]

INSTALL = "scripts/gpu_bundle.sh install ... --name exllamav3 (docs/gpus.md), then RIG_EXLLAMAV3_PYTHON"
PAGE = 256  # exllamav3's cache page: the cache's size is a multiple of it
TOKENS_PER_JOB = 1024  # the default cache's share per job: a prompt set's prompt and 200 tokens
MAX_BATCH = 256  # the generator's jobs at once


def cache_tokens(batch: int, per_job: int = TOKENS_PER_JOB) -> int:
    """The cache ``batch`` jobs of ``per_job`` tokens each take: each job holds whole pages."""
    return batch * -(-per_job // PAGE) * PAGE


class Adapter:
    def __init__(self, model: str, options: dict[str, Any], threads: int) -> None:
        try:
            import exllamav3
            from exllamav3 import Cache, Config, Generator, Model, Tokenizer
            from exllamav3.generator.sampler import ArgmaxSampler
            from exllamav3.version import __version__ as exllamav3_version
        except ImportError as exc:
            raise Missing(f"exllamav3 is not importable here ({exc}): {INSTALL}") from None
        try:
            config = Config.from_directory(model)
        except (OSError, ValueError, AssertionError, KeyError) as exc:
            raise Missing(f"no EXL3 model at {model} ({exc}): convert one with "
                          "scripts/convert_exl3.sh, set RIG_EXLLAMAV3_MODEL") from None
        self.Job, self.sampler = exllamav3.Job, ArgmaxSampler()
        self.settings = {"cache_tokens": int(options.get("cache_tokens", cache_tokens(MAX_BATCH))),
                         "max_chunk_size": int(options.get("max_chunk_size", 2048))}
        self.model = Model.from_config(config)
        self.cache = Cache(self.model, max_num_tokens=self.settings["cache_tokens"])
        self.model.load(device="cuda:0")  # one GPU (the first visible), as the other engines here
        self.tokenizer = Tokenizer.from_config(config)
        self.generator = Generator(model=self.model, cache=self.cache, tokenizer=self.tokenizer,
                                   max_batch_size=MAX_BATCH,
                                   max_chunk_size=self.settings["max_chunk_size"])
        self.version = exllamav3_version
        self.settings["bits"] = _bits(model)

    def run(self, requests: list[dict[str, Any]], batch: int,
            emit: Callable[[dict[str, Any]], None]) -> None:
        prompts = {r["request_id"]: self.tokenizer.encode(r["text"], add_bos=True) for r in requests}
        longest = max(int(ids.shape[-1]) + r["max_tokens"] for r, ids in zip(requests, prompts.values()))
        if cache_tokens(min(batch, len(requests)), longest) > self.settings["cache_tokens"]:
            raise ValueError(f"batch {batch} of jobs up to {longest} tokens does not fit in the "
                             f"cache of {self.settings['cache_tokens']} tokens (option cache_tokens)")
        if batch > MAX_BATCH:
            raise ValueError(f"batch {batch}: the generator runs at most {MAX_BATCH} jobs at once")
        pending = list(reversed(requests))
        live: dict[int, tuple[Stamps, list[int]]] = {}  # request id -> stamps, [tokens, prompt]

        def add() -> None:
            request = pending.pop()
            ids = prompts[request["request_id"]]
            job = self.Job(input_ids=ids, max_new_tokens=request["max_tokens"],
                           min_new_tokens=request["max_tokens"], stop_conditions=[],
                           sampler=self.sampler, identifier=request["request_id"])
            live[request["request_id"]] = (Stamps(request), [0, int(ids.shape[-1])])
            self.generator.enqueue(job)

        while pending and len(live) < batch:
            add()
        while live:
            results = self.generator.iterate()
            now = time.perf_counter_ns()
            for result in results:
                if result["stage"] != "streaming":
                    continue
                stamps, counts = live[result["identifier"]]
                ids = result.get("token_ids")
                if ids is not None and ids.numel():
                    counts[0] += int(ids.numel())
                    stamps.output(now)
                if result["eos"]:
                    del live[result["identifier"]]
                    emit(_finished(stamps, counts, result, now))
                    if pending:
                        add()

    def close(self) -> None:
        self.generator.close()
        self.model.unload()


def _finished(stamps: Stamps, counts: list[int], result: dict[str, Any], now: int) -> dict[str, Any]:
    """The request's record; an error where the streamed ids and the job's own count differ."""
    error = None
    if result.get("new_tokens") is not None and result["new_tokens"] != counts[0]:
        error = f"streamed {counts[0]} token ids, the job counted {result['new_tokens']}"
    reason = {"max_new_tokens": "length", "stop_token": "stop"}.get(result.get("eos_reason", ""),
                                                                   result.get("eos_reason"))
    return stamps.record(done_ns=now, prompt_tokens=counts[1], output_tokens=counts[0],
                         finish_reason=reason, error=error)


def _bits(model: str) -> float | None:
    """Bits per weight, as exllamav3's converter wrote them into config.json."""
    try:
        config = json.loads((Path(model) / "config.json").read_text(encoding="utf-8"))
        return config["quantization_config"]["bits"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
