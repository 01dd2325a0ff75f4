"""Hugging Face transformers in-process: `model.generate`, with or without a streamer.

Runs in .venv-transformers (the worker, loadtest/inprocess/worker.py). Greedy decoding with
exactly the asked output length: `min_new_tokens` = `max_new_tokens` (EOS is suppressed until
then, so every answer, in a batch too, has that many tokens; the count is the ids generate
returned past the prompt).

- without a streamer (`streamer` off): generate returns each answer whole; records carry the
  end-to-end time, no TTFT.
- with a streamer (`streamer` on): a transformers `BaseStreamer` whose `put` stamps each step's
  new tokens as generate hands them over (the first put is the prompt, not stamped); the ids
  are decoded to text once at the end, as a text streamer's caller would hold them.
- device (`:cuda`, with the streamer): the model and each wave's inputs on the GPU; else CPU.
- batch B: requests go in waves of B (static batching, as generate does), left-padded; each
  request of a wave is sent when the wave starts and done when generate returns it.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from loadtest.inprocess.stamps import Missing, Stamps

__all__ = ["Adapter"]


class Adapter:
    def __init__(self, model: str, options: dict[str, Any], threads: int) -> None:
        try:
            import torch
            import transformers
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise Missing(f"transformers is not importable here ({exc}): run scripts/install.sh "
                          "(it makes .venv-transformers)") from None
        if threads > 0:
            torch.set_num_threads(threads)
        self.torch = torch
        self.streamer = bool(options.get("streamer"))
        dtype = options.get("dtype", "bfloat16")
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.device = options.get("device", "cpu")
        self.model = AutoModelForCausalLM.from_pretrained(model, dtype=getattr(torch, dtype))
        self.model.to(self.device).eval()
        self.version = transformers.__version__
        self.settings = {"dtype": dtype, "streamer": self.streamer, "device": self.device,
                         "torch_threads": torch.get_num_threads(), "torch": torch.__version__}

    def run(self, requests: list[dict[str, Any]], batch: int,
            emit: Callable[[dict[str, Any]], None]) -> None:
        for start in range(0, len(requests), batch):
            self._wave(requests[start:start + batch], emit)

    def _wave(self, wave: list[dict[str, Any]], emit: Callable[[dict[str, Any]], None]) -> None:
        torch = self.torch
        max_tokens = max(r["max_tokens"] for r in wave)
        stamps = [Stamps(r) for r in wave]
        inputs = self.tokenizer([r["text"] for r in wave], return_tensors="pt",
                                padding=True).to(self.device)
        prompt_tokens = [int(n) for n in inputs["attention_mask"].sum(dim=1)]
        streamer = _stamping_streamer(stamps) if self.streamer else None
        with torch.inference_mode():
            output = self.model.generate(**inputs, do_sample=False, max_new_tokens=max_tokens,
                                         min_new_tokens=max_tokens, streamer=streamer,
                                         pad_token_id=self.tokenizer.pad_token_id)
        done = time.perf_counter_ns()
        new = output[:, inputs["input_ids"].shape[1]:]
        if streamer is not None:
            self.tokenizer.batch_decode(new)  # the text a streaming caller would show
        for stamp, prompt, row in zip(stamps, prompt_tokens, new):
            emit(stamp.record(done_ns=done, prompt_tokens=prompt, output_tokens=int(row.shape[0]),
                              finish_reason="length", streamed=self.streamer))


def _stamping_streamer(stamps: list[Stamps]) -> Any:
    """A transformers streamer (BaseStreamer: put, end): `put` gets the prompt first, then each
    step's new token ids, one per sequence of the batch; each step is stamped."""
    from transformers.generation.streamers import BaseStreamer

    class StampingStreamer(BaseStreamer):  # type: ignore[misc]
        def __init__(self) -> None:
            self.prompt_seen = False

        def put(self, value: Any) -> None:
            now = time.perf_counter_ns()
            if not self.prompt_seen:
                self.prompt_seen = True
                return
            for stamp in stamps:
                stamp.output(now)

        def end(self) -> None:
            pass

    return StampingStreamer()
