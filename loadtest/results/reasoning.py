"""A reasoning model's run: its reasoning and its answer timed and counted apart.

Engines that parse a model's reasoning send it in its own field of each chat chunk (vLLM's
`reasoning`, SGLang's and llama.cpp's `reasoning_content`: loadtest/client/protocols/openai.py);
the client stamps its first and last reasoning chunks and the first answer chunk after them
(loadtest/results/record.py). Over completed requests:

- TTFT stays the first chunk of any kind; `ttfa_*` is the time to the first *answer* chunk, what
  a user waits for (a request that did not reason: its TTFT);
- `ttfr_*`: send -> first reasoning chunk; `reasoning_time_*`: first -> last reasoning chunk;
  `switch_*`: last reasoning chunk -> first answer chunk, the step between the two;
- `reasoning_chunks`, `answer_chunks`: the chunks that carried reasoning, and answer (text or
  tool calls), as the client saw them (a chunk that carried both counts in both);
- `reasoning_tokens`: the engine's own count (usage.completion_tokens_details.reasoning_tokens)
  where every request that reasoned got one that can be true (above 0, at most its output
  tokens); `answer_tokens` = output_tokens - reasoning_tokens. Otherwise both are empty and
  `reasoning_tokens_source` says `none`: the chunks are no count of tokens, since the engine's
  parser streams no chunk for the reasoning markers (`<think>`, `</think>`: one token each in
  most reasoning models' vocabularies, several in a small one) nor for the end-of-sequence
  token, and a parser may hold text back and send several tokens in a chunk. vLLM's `hf`
  (response template) parser reports 0 reasoning tokens for answers that did reason: not taken.
- `reasoning_unanswered`: requests that reasoned and never answered (cut at max_tokens while
  reasoning): they have no TTFA, and are left out of it, not counted as fast.

The columns are in a row only when a request of the run reasoned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


from loadtest.results.distribution import STATS, distribution
from loadtest.results.record import RequestRecord

__all__ = ["reasoning_tokens", "summarize_reasoning"]


def reasoning_tokens(record: RequestRecord) -> int | None:
    """The engine's count of the request's reasoning tokens, where it can be true."""
    told = record.reasoning_tokens
    if told is not None and 0 < told <= (record.output_tokens or 0) and record.reasoning_chunks:
        return told
    return None


def summarize_reasoning(records: Sequence[RequestRecord]) -> dict[str, Any]:
    done = [r for r in records if r.ok]
    reasoned = [r for r in done if r.reasoning_chunks]
    if not reasoned:
        return {}
    counts = [reasoning_tokens(r) for r in reasoned]
    known = all(n is not None for n in counts)
    total = sum(n or 0 for n in counts)
    output = sum(r.output_tokens or 0 for r in done)
    return {
        "reasoning_requests": len(reasoned),
        "reasoning_unanswered": sum(1 for r in reasoned if r.first_answer_ns is None),
        "reasoning_chunks": sum(r.reasoning_chunks for r in reasoned),
        "answer_chunks": sum(r.output_chunks for r in done) - _reasoning_only(reasoned),
        "reasoning_tokens": total if known else None,
        "answer_tokens": max(output - total, 0) if known else None,
        "reasoning_tokens_source": "usage" if known else "none",
        **_ms("ttfa", [_ttfa(r) for r in done], STATS),
        **_ms("ttfr", [_span(r.sent_ns, r.first_reasoning_ns) for r in reasoned]),
        **_ms("reasoning_time", [_span(r.first_reasoning_ns, r.last_reasoning_ns)
                                 for r in reasoned]),
        **_ms("switch", [_span(r.last_reasoning_ns, r.first_answer_ns) for r in reasoned]),
    }


def _reasoning_only(records: Sequence[RequestRecord]) -> int:
    """Chunks that carried reasoning and no answer: all reasoning chunks but the one at the
    switch, when the first answer came in a reasoning chunk (its stamp is the last reasoning's)."""
    return sum(r.reasoning_chunks - (r.first_answer_ns is not None
                                     and r.first_answer_ns == r.last_reasoning_ns)
               for r in records)


def _ttfa(record: RequestRecord) -> int | None:
    if record.reasoning_chunks:
        return _span(record.sent_ns, record.first_answer_ns)
    return _span(record.sent_ns, record.first_chunk_ns)


def _span(start_ns: int | None, end_ns: int | None) -> int | None:
    return None if start_ns is None or end_ns is None else end_ns - start_ns


def _ms(metric: str, spans_ns: list[int | None],
        stats: tuple[str, ...] = ("p50", "p99")) -> dict[str, float | None]:
    return distribution(metric, [s / 1e6 for s in spans_ns if s is not None], stats)
