"""What every source hands to build.py: request items (turned into bodies there) and the
context a source builds from (options, counts, tokenizer, seeded randomness)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from loadtest.workload.lengths import Lengths
from loadtest.workload.chosen import WorkloadOptions
from loadtest.workload.tokens import TokenText

__all__ = ["Context", "Item"]


@dataclass(frozen=True)
class Item:
    prompt_id: str
    prompt: str | list[dict[str, str]]  # a text, or a chat message list
    max_tokens: int
    prompt_tokens: int | None = None  # what the source built it to, where it knows
    # body fields beyond the prompt (a constrained answer's: loadtest/workload/structured.py)
    extra: dict[str, Any] | None = None


@dataclass(frozen=True)
class Context:
    options: WorkloadOptions
    requests: int  # requests, or sessions for conversation workloads
    max_tokens: int  # --max-tokens: the output length when --output-len is not given
    tokens: TokenText | None = None

    def rng(self, stream: int) -> np.random.Generator:
        """An independent seeded stream per use (lengths, texts, ...), the same in every process."""
        return np.random.default_rng([self.options.seed, stream])

    @property
    def output_len(self) -> Lengths | None:
        return self.options.output_len

    def output_lengths(self, rng: np.random.Generator, count: int) -> np.ndarray:
        if self.options.output_len is None:
            return np.full(count, self.max_tokens, dtype=np.int64)
        return self.options.output_len.draw(rng, count)

    @property
    def output_label(self) -> str:
        return self.options.output_len.label if self.options.output_len else str(self.max_tokens)

    def need_tokens(self) -> TokenText:
        assert self.tokens is not None, "build.py loads the tokenizer for sources that need one"
        return self.tokens
