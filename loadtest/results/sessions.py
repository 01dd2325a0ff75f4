"""summarize_sessions(records) -> a conversation run's columns: how its sessions ended, and TTFT
of first turns against later ones.

A later turn's prompt starts with the whole conversation before it, which an engine with a
prefix cache has already computed: its TTFT against the first turn's is that cache at work
(or, without one, the cost of the longer prompt). Columns (none for a run without sessions):
- sessions: sessions started; sessions_complete, sessions_context_full, sessions_failed: how
  they ended (RequestRecord.session_end; a session still running when the run was interrupted
  has no end and is in none of them);
- turns_sent, turns_not_sent: turns sent (served, failed or refused) and turns never sent
  because their session ended first; context_refused: turns the engine refused for their length;
- ttft_turn1_p50/p90_ms, ttft_later_p50/p90_ms: TTFT of served first turns and of served later
  turns (numpy's default percentiles, as every other column); prompt_tokens_turn1_mean,
  prompt_tokens_later_mean: their mean prompt, as the engine reported it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from loadtest.results.record import SESSION_ENDS, RequestRecord

__all__ = ["summarize_sessions"]


def summarize_sessions(records: Sequence[RequestRecord]) -> dict[str, Any]:
    turns = [r for r in records if r.session_id is not None]
    if not turns:
        return {}
    row: dict[str, Any] = {"sessions": len({r.session_id for r in turns})}
    for end in SESSION_ENDS:
        row[f"sessions_{end}"] = sum(1 for r in turns if r.session_end == end)
    row["turns_sent"] = len(turns)
    row["turns_not_sent"] = sum(r.turns_not_sent for r in turns)
    row["context_refused"] = sum(1 for r in turns if r.context_refused)
    served = [r for r in turns if r.ok]
    for name, group in (("turn1", [r for r in served if r.turn == 1]),
                        ("later", [r for r in served if r.turn != 1])):
        row.update(_percentiles(f"ttft_{name}", [r.ttft_ms for r in group if r.ttft_ms is not None]))
        prompts = [r.prompt_tokens for r in group if r.prompt_tokens is not None]
        row[f"prompt_tokens_{name}_mean"] = float(np.mean(prompts)) if prompts else None
    return row


def _percentiles(metric: str, values: list[float]) -> dict[str, float | None]:
    if not values:
        return {f"{metric}_p50_ms": None, f"{metric}_p90_ms": None}
    p50, p90 = np.percentile(np.asarray(values, dtype=float), [50, 90])
    return {f"{metric}_p50_ms": float(p50), f"{metric}_p90_ms": float(p90)}
