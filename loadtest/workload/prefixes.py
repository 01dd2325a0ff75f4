"""Shared prefixes: G groups, each a P-token prefix (a system prompt, few-shot examples) that
every request of the group starts with, then a unique suffix of --input-len tokens. Requests
interleave the groups (request i is in group i mod G), so an engine's prefix cache must hold
G prefixes at once to hit. Resetting that cache and reading its hits is the engine spec's part.

The prefix and suffix are whole-word texts, so prefix + suffix is exactly P + S tokens."""

from __future__ import annotations

from loadtest.workload.items import Context, Item

__all__ = ["prefix_items", "prefix_name"]

_PREFIXES, _LENGTHS, _OUTPUTS, _SUFFIXES = 11, 12, 13, 14
_CHECKED = 16


def prefix_items(context: Context) -> list[Item]:
    tokens = context.need_tokens()
    o = context.options
    assert o.input_len is not None
    rng = context.rng(_PREFIXES)
    prefixes = [tokens.draw(rng, o.prefix_len + tokens.special) for _ in range(o.prefix_groups)]
    suffixes = o.input_len.draw(context.rng(_LENGTHS), context.requests)
    outputs = context.output_lengths(context.rng(_OUTPUTS), context.requests)
    text_rng = context.rng(_SUFFIXES)
    items = []
    for i, (suffix, out) in enumerate(zip(suffixes, outputs)):
        group = i % o.prefix_groups
        prompt = prefixes[group] + tokens.words_text(text_rng, int(suffix))
        items.append(Item(f"g{group}-{i}", prompt, int(out), tokens.special + o.prefix_len + int(suffix)))
    tokens.check_exact([(str(item.prompt), item.prompt_tokens or 0) for item in items[:_CHECKED]])
    return items


def prefix_name(context: Context) -> str:
    o = context.options
    assert o.input_len is not None
    return (f"prefix-{o.prefix_groups}x{o.prefix_len}+{o.input_len.label}x{context.output_label}"
            f"-{context.requests}")
