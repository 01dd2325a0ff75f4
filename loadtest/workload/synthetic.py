"""Synthetic requests of token-exact lengths: --input-len and --output-len distributions, each
prompt random whole-word tokens of the served model's tokenizer (loadtest/workload/tokens.py),
so the engine counts exactly the length drawn. Seeded: the same seed gives the same requests."""

from __future__ import annotations

from loadtest.workload.items import Context, Item

__all__ = ["synthetic_items", "synthetic_name"]

_LENGTHS, _OUTPUTS, _TEXT = 1, 2, 3  # the seed's streams
_CHECKED = 16  # prompts encoded back to check the tokenizer keeps words apart


def synthetic_items(context: Context) -> list[Item]:
    tokens = context.need_tokens()
    assert context.options.input_len is not None
    inputs = context.options.input_len.draw(context.rng(_LENGTHS), context.requests)
    inputs = inputs.clip(min=tokens.min_tokens())
    outputs = context.output_lengths(context.rng(_OUTPUTS), context.requests)
    rng = context.rng(_TEXT)
    items = [Item(f"syn-{i}", tokens.draw(rng, int(n)), int(m), int(n))
             for i, (n, m) in enumerate(zip(inputs, outputs))]
    tokens.check_exact([(str(item.prompt), item.prompt_tokens or 0) for item in items[:_CHECKED]])
    return items


def synthetic_name(context: Context) -> str:
    assert context.options.input_len is not None
    return f"synthetic-{context.options.input_len.label}x{context.output_label}-{context.requests}"
