"""A run's figures over a window of time and per interval (timeslices, stages), from its records.

Times are seconds from the run's origin (the moment dispatch opened; for a run without one, the
first send). Every figure comes from the per-request records (loadtest/results/record.py):

- a request belongs to the interval its send falls in (`sent_ns`): its TTFT, end-to-end time
  and chunk gaps (ITL) count there, so a latency figure says what a request sent then saw;
- throughput counts work where it happened: `req_per_s` is requests *completed* in the interval
  (`done_ns`) per second, `output_tok_per_s` output tokens whose chunk *arrived* in it per second
  (each chunk of a request weighs its output_tokens / output_chunks; a chunk's arrival is
  first_chunk_ns plus the gaps before it), so a long answer straddling an edge is split across it;
- the interval's length is its own (end - start), the last timeslice cut at the run's end.

Percentiles are numpy's (linear), as in loadtest/results/summary.py; a figure with no value
behind it is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from loadtest.results.record import RequestRecord

__all__ = ["Window", "interval_figures", "requests_frame", "chunks_frame", "timeslices",
           "window_columns"]

_LATENCIES = ("ttft", "e2e", "itl")


@dataclass(frozen=True)
class Window:
    """The measured part of a run: [start_s, end_s) from its origin."""
    start_s: float
    end_s: float

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s


def requests_frame(records: Sequence[RequestRecord], origin_ns: int) -> pd.DataFrame:
    """One row per request that was served or failed (a turn refused for its context is neither):
    its send and end in seconds from the origin, ok, latencies in ms, its chunk gaps in ms."""
    rows = [{"sent_s": (r.sent_ns - origin_ns) / 1e9,
             "done_s": None if r.done_ns is None else (r.done_ns - origin_ns) / 1e9,
             "ok": r.ok, "ttft_ms": r.ttft_ms if r.ok else None,
             "e2e_ms": r.e2e_ms if r.ok else None,
             "gaps_ms": [g / 1e6 for g in r.chunk_gaps_ns] if r.ok else []}
            for r in records if not r.context_refused]
    columns = ["sent_s", "done_s", "ok", "ttft_ms", "e2e_ms", "gaps_ms"]
    return pd.DataFrame(rows, columns=columns).astype(
        {"sent_s": float, "done_s": float, "ok": bool, "ttft_ms": float, "e2e_ms": float})


def chunks_frame(records: Sequence[RequestRecord], origin_ns: int) -> pd.DataFrame:
    """One row per output chunk of a completed request: its arrival (s from the origin) and the
    output tokens it stands for."""
    arrivals: list[float] = []
    weights: list[float] = []
    for r in records:
        if not r.ok or r.first_chunk_ns is None or not r.output_chunks:
            continue
        stamps = r.first_chunk_ns + np.concatenate(([0], np.cumsum(r.chunk_gaps_ns, dtype=np.int64)))
        arrivals.extend(((stamps - origin_ns) / 1e9).tolist())
        weights.extend([(r.output_tokens or 0) / len(stamps)] * len(stamps))
    return pd.DataFrame({"at_s": np.asarray(arrivals, dtype=float),
                         "tokens": np.asarray(weights, dtype=float)})


def interval_figures(requests: pd.DataFrame, chunks: pd.DataFrame, start_s: float,
                     end_s: float) -> dict[str, Any]:
    """The key figures of [start_s, end_s) (definitions: the module's docstring)."""
    start_s, end_s = round(start_s, 6), round(end_s, 6)  # to the µs, as run.json keeps them
    length = end_s - start_s
    sent = requests[(requests.sent_s >= start_s) & (requests.sent_s < end_s)]
    done = requests[requests.ok & (requests.done_s >= start_s) & (requests.done_s < end_s)]
    tokens = chunks.tokens[(chunks.at_s >= start_s) & (chunks.at_s < end_s)].sum()
    served = sent[sent.ok]
    figures: dict[str, Any] = {
        "start_s": start_s, "end_s": end_s,
        "sent": int(len(sent)), "completed": int(len(done)), "failed": int((~sent.ok).sum()),
        "output_tok_per_s": float(tokens / length) if length > 0 else None,
        "req_per_s": float(len(done) / length) if length > 0 else None,
    }
    gaps = [g for row in served.gaps_ms for g in row]
    values = {"ttft": served.ttft_ms.dropna(), "e2e": served.e2e_ms.dropna(),
              "itl": pd.Series(gaps, dtype=float)}
    for metric in _LATENCIES:
        figures.update(_percentiles(metric, values[metric]))
    return figures


def _percentiles(metric: str, values: pd.Series) -> dict[str, float | None]:
    names = [f"{metric}_{s}_ms" for s in ("p50", "p90", "p99")]
    if values.empty:
        return dict.fromkeys(names)
    return dict(zip(names, (float(v) for v in np.percentile(values.to_numpy(), [50, 90, 99]))))


def timeslices(requests: pd.DataFrame, chunks: pd.DataFrame, slice_s: float,
               end_s: float) -> list[dict[str, Any]]:
    """The figures of every slice_s interval from the origin to end_s (the last one shorter)."""
    count = int(np.ceil(round(end_s / slice_s, 9)))
    return [interval_figures(requests, chunks, i * slice_s, min((i + 1) * slice_s, end_s))
            for i in range(count)]


def window_columns(requests: pd.DataFrame, chunks: pd.DataFrame, window: Window) -> dict[str, Any]:
    """The row's window columns: the window itself and its key figures, each named window_*."""
    figures = interval_figures(requests, chunks, window.start_s, window.end_s)
    columns: dict[str, Any] = {"window_start_s": figures.pop("start_s"),
                               "window_end_s": figures.pop("end_s"),
                               "window_s": round(window.length_s, 6)}
    columns.update({f"window_{name}": value for name, value in figures.items()})
    return columns
