"""Prompt tokens asked vs reported: token-exact sources say how many tokens each prompt was
built to (RequestSpec.prompt_tokens); the engine says how many it read (usage.prompt_tokens in
each record). A request whose two counts differ by more than PROMPT_TOKENS_TOLERANCE is a
mismatch; the run's row counts them and names the likely cause, and the results' checks turn
a count above zero into the prompt_tokens_mismatch warning. Never corrected, never silent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Protocol

from loadtest.workload.spec import Workload

__all__ = ["PROMPT_TOKENS_TOLERANCE", "prompt_token_columns"]

# Token-exact sources are built to the token: any difference is a cause worth naming.
PROMPT_TOKENS_TOLERANCE = 0


class _Record(Protocol):
    request_id: int
    prompt_tokens: int | None


def asked_tokens(workload: Workload, request_id: int) -> int | None:
    """What request `request_id` was built to, without building a lazy spec's body."""
    asked = getattr(workload.specs, "asked", None)
    if asked is not None:
        return asked(request_id)
    return workload.specs[request_id].prompt_tokens


def prompt_token_columns(workload: Workload, records: Iterable[_Record], api: str) -> dict[str, Any]:
    """prompt_tokens_asked_mean, _reported_mean, _mismatched and _mismatch_cause for the
    requests whose asked count is known and whose engine reported one; {} when none."""
    if workload.sessions or not workload.specs:
        return {}
    pairs = []
    for record in records:
        if record.prompt_tokens is None or not 0 <= record.request_id < len(workload.specs):
            continue
        asked = asked_tokens(workload, record.request_id)
        if asked is not None:
            pairs.append((asked, record.prompt_tokens))
    if not pairs:
        return {}
    differences = [reported - asked for asked, reported in pairs]
    mismatched = [d for d in differences if abs(d) > PROMPT_TOKENS_TOLERANCE]
    columns: dict[str, Any] = {
        "prompt_tokens_asked_mean": round(sum(a for a, _ in pairs) / len(pairs), 2),
        "prompt_tokens_reported_mean": round(sum(r for _, r in pairs) / len(pairs), 2),
        "prompt_tokens_mismatched": len(mismatched),
    }
    if mismatched:
        columns["prompt_tokens_mismatch_cause"] = _cause(mismatched, len(pairs), api)
    return columns


def _cause(differences: list[int], requests: int, api: str) -> str:
    """The likeliest reason, in words: a constant difference is added tokens; a varying one is
    another tokenizer."""
    (common, times), = Counter(differences).most_common(1)
    constant = times == len(differences) == requests
    if constant and api == "chat":
        return (f"chat template: the engine's chat template adds {common:+d} tokens around each "
                "message (asked counts the message alone)")
    if constant and abs(common) <= 2:
        return (f"BOS/special tokens: the engine counts {common:+d} tokens per prompt against the "
                "tokenizer file (it adds or drops a BOS the file does not)")
    return (f"tokenizer: {len(differences)} of {requests} prompts counted differently (by "
            f"{min(differences):+d} to {max(differences):+d}): the engine's tokenizer is not "
            "--tokenizer's file")
