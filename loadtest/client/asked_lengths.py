"""Output lengths asked per request: a trace, a dataset or agent sessions ask each request its own
length, so under --ignore-eos a run's answers differ in length by design, and the same for every
engine. What says whether the engine kept to them is each answer against its own ask, not the
spread between answers: `output_off_asked_max_pct` is the largest miss, in % of the ask, over the
completed requests (absent where one length was asked: the spread says it then).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from loadtest.client.bounds import requested_tokens
from loadtest.results.record import RequestRecord
from loadtest.workload.spec import Workload

__all__ = ["asked_length_columns"]


def asked_length_columns(workload: Workload, records: Iterable[RequestRecord],
                         ignore_eos: bool) -> dict[str, Any]:
    """{"output_off_asked_max_pct": ...} for an --ignore-eos run whose requests asked several
    output lengths; {} otherwise (no --ignore-eos, conversations, one length asked)."""
    if not ignore_eos or workload.sessions or not workload.specs:
        return {}
    # a lazy source (a trace) says each ask without building the body again
    ask = getattr(workload.specs, "output_asked", None) or (
        lambda i: requested_tokens(workload.specs[i].body))
    pairs = []
    for record in records:
        if (record.error_kind is not None or record.output_tokens is None
                or not 0 <= record.request_id < len(workload.specs)):
            continue
        asked = ask(record.request_id)
        if asked is not None:
            pairs.append((asked, record.output_tokens))
    if len({asked for asked, _ in pairs}) < 2:
        return {}
    worst = max(abs(got - asked) / asked for asked, got in pairs)
    return {"output_off_asked_max_pct": round(100 * worst, 2)}
