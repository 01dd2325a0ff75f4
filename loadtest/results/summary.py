"""summarize(records) -> the run's numbers, computed from raw per-request records.

Percentiles: numpy's default (linear interpolation between the two nearest ranks), over exact
values, never Locust's rounded buckets. Every count behind a rate is kept beside it.
- completion_time_s: first request sent -> last response finished (failed ones included: the
  workload is done when its last request is).
- output_tok_per_s: output tokens of completed requests / completion_time_s.
- ttft_*, e2e_*: over completed requests. itl_*: over the pooled chunk gaps of completed requests.
  A completed request whose stream carried no text (empty_answers) has no TTFT, no gaps and no
  TPOT: those are over the others.
- tpot_*: per completed request, (e2e - ttft) / (output_tokens - 1).
Open loop (records with a scheduled time) adds:
- ttft_sched_*, e2e_sched_*: over completed requests, from each one's scheduled send time;
- send_lag_p50/p99/max_ms: actual send - scheduled send, over every request;
- capped_requests, cap_wait_p99_ms: requests that found every user busy, and their wait;
- scheduled_rate_per_s, send_rate_per_s, done_rate_per_s: requests per second as scheduled,
  as actually sent and as finished, each over its own span (first to last); the schedule's own
  rate differs from --rate by chance (Poisson), and an engine keeps up when its answers finish
  at the rate they were scheduled: `done_rate_per_s` is the achieved rate the knee is found on.
A reasoning stream adds its reasoning and answer apart (loadtest/results/reasoning.py).
Conversations add their sessions' columns (loadtest/results/sessions.py); a turn the engine
refused because its conversation outgrew the context ended its session and is in neither
`completed` nor `failed` (it is in `requests_sent` and `context_refused`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from loadtest.results.distribution import distribution
from loadtest.results.reasoning import summarize_reasoning
from loadtest.results.record import RequestRecord
from loadtest.results.sessions import summarize_sessions

# Chunks closer than this came out of one buffer, not one decode step each: a client process that
# fell behind read its chunks 0.014 ms apart (ITL p50; evidence/2026-11-26/gpu-layouts,
# client1), and the fastest steps of any engine measured here were 0.59 ms (llama.cpp, the tiny
# model, on CPU: evidence/2026-11-27/lora-llamacpp-rejudged)
BURST_GAP_MS = 0.25

__all__ = ["arrived_at_once", "summarize"]


def summarize(records: Sequence[RequestRecord]) -> dict[str, Any]:
    done = [r for r in records if r.ok]
    failed = [r for r in records if not r.ok and not r.context_refused]
    row: dict[str, Any] = {
        "requests_sent": len(records),
        "completed": len(done),
        "failed": len(failed),
        "errors": _error_counts(failed),
        "reconnects": sum(r.reconnects for r in records),
        "rate_limited": sum(r.rate_limited for r in records),
        "rate_limited_wait_s": sum(r.rate_limited_wait_ns for r in records) / 1e9,
    }
    if records:
        start = min(r.sent_ns - r.rate_limited_wait_ns for r in records)  # the first send
        end = max(r.done_ns or r.sent_ns for r in records)
        row["completion_time_s"] = (end - start) / 1e9
    else:
        row["completion_time_s"] = None
    output = [r.output_tokens or 0 for r in done]
    row["output_tokens"] = int(sum(output))
    row["output_chunks"] = int(sum(r.output_chunks for r in records))
    row["prompt_tokens"] = int(sum(r.prompt_tokens or 0 for r in done))
    row["avg_output_tokens"] = float(np.mean(output)) if output else None
    row["min_output_tokens"] = int(min(output)) if output else None
    row["max_output_tokens"] = int(max(output)) if output else None
    row["output_tokens_source"] = _tokens_source(done)
    row["buffered_requests"] = sum(1 for r in done if _arrived_at_once(r))
    row["empty_answers"] = sum(1 for r in done if not r.output_chunks)
    seconds = row["completion_time_s"]
    row["output_tok_per_s"] = row["output_tokens"] / seconds if seconds else None
    row["req_per_s"] = len(done) / seconds if seconds else None
    row.update(distribution("ttft", [r.ttft_ms for r in done if r.ttft_ms is not None]))
    row.update(distribution("itl", [g / 1e6 for r in done for g in r.chunk_gaps_ns]))
    row.update(distribution("e2e", [r.e2e_ms for r in done if r.e2e_ms is not None]))
    row.update(distribution("tpot", [_tpot(r) for r in done if _tpot(r) is not None]))
    if any(r.scheduled_ns is not None for r in records):
        row.update(_schedule(records, done))
    row.update(summarize_sessions(records))
    row.update(summarize_reasoning(records))
    return row


def _schedule(records: Sequence[RequestRecord], done: Sequence[RequestRecord]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    row.update(distribution("ttft_sched", [r.ttft_sched_ms for r in done if r.ttft_sched_ms is not None]))
    row.update(distribution("e2e_sched", [r.e2e_sched_ms for r in done if r.e2e_sched_ms is not None]))
    lags = np.asarray([r.send_lag_ms for r in records if r.send_lag_ms is not None], dtype=float)
    p50, p99 = np.percentile(lags, [50, 99])
    row.update({"send_lag_p50_ms": float(p50), "send_lag_p99_ms": float(p99),
                "send_lag_max_ms": float(lags.max())})
    workers = worker_send_lags(records)
    if len(workers) > 1:  # one process: the run's own figures say it all
        row["send_lag_worst_worker_p99_ms"] = max(w["send_lag_p99_ms"] for w in workers)
    waits = [r.cap_wait_ns / 1e6 for r in records if r.cap_wait_ns > 0]
    row["capped_requests"] = len(waits)
    row["cap_wait_p99_ms"] = float(np.percentile(waits, 99)) if waits else 0.0
    row["scheduled_rate_per_s"] = _rate([r.scheduled_ns for r in records if r.scheduled_ns is not None])
    row["send_rate_per_s"] = _rate([r.sent_ns for r in records])
    row["done_rate_per_s"] = _rate([r.done_ns for r in records if r.done_ns is not None])
    return row


def worker_send_lags(records: Sequence[RequestRecord]) -> list[dict[str, Any]]:
    """Open loop: each load-generator process's (record.worker's) send lag, p50 and p99, over
    the records it sent on schedule; a worker that falls behind shows here even where the
    pooled figures, diluted by the others, do not."""
    lags: dict[int, list[float]] = {}
    for r in records:
        if r.send_lag_ms is not None:
            lags.setdefault(r.worker, []).append(r.send_lag_ms)
    out = []
    for worker, values in sorted(lags.items()):
        p50, p99 = np.percentile(values, [50, 99])
        out.append({"worker": worker, "sends": len(values), "send_lag_p50_ms": float(p50),
                    "send_lag_p99_ms": float(p99)})
    return out


def _rate(stamps_ns: list[int]) -> float | None:
    """Events per second over their own span: (n - 1) / (last - first)."""
    if len(stamps_ns) < 2:
        return None
    span_s = (max(stamps_ns) - min(stamps_ns)) / 1e9
    return (len(stamps_ns) - 1) / span_s if span_s > 0 else None


def _arrived_at_once(record: RequestRecord) -> bool:
    return arrived_at_once(record.output_chunks, record.ttft_ms, record.e2e_ms,
                           record.chunk_gaps_ns)


def arrived_at_once(chunks: int, ttft_ms: float | None, e2e_ms: float | None,
                    gaps_ns: Sequence[int]) -> bool:
    """The whole stream of a long answer arrived in one burst: its chunks within the last tenth
    of its end-to-end time and back to back (their median gap under BURST_GAP_MS), so its TTFT
    is really its end-to-end latency: something between the engine's sampler and this client
    held the chunks back (a starved API server, a buffering proxy, a client reading late).

    The first test alone also takes an answer that waited long for its first token and was then
    decoded at the engine's pace, each chunk a step apart: the last answers of a busy run, their
    batch nearly empty (vLLM on CPU, 256 users of 1,024-token prompts: 16 of 512 answers waited
    18.3 s, then streamed 32 tokens in 0.8-2.0 s, median gaps 27-36 ms:
    evidence/2026-11-27/answers-arrived-whole). The lean reference client of `rig bench` judges
    its own records by this same rule."""
    if chunks < 16 or ttft_ms is None or not e2e_ms:
        return False
    if e2e_ms - ttft_ms >= 0.1 * e2e_ms:
        return False
    return bool(gaps_ns) and float(np.median(gaps_ns)) < BURST_GAP_MS * 1e6


def _tpot(record: RequestRecord) -> float | None:
    if record.ttft_ms is None or record.e2e_ms is None or (record.output_tokens or 0) < 2:
        return None
    return (record.e2e_ms - record.ttft_ms) / (record.output_tokens - 1)


def _tokens_source(records: Sequence[RequestRecord]) -> str | None:
    sources = sorted({r.output_tokens_source for r in records if r.output_tokens_source})
    return "+".join(sources) if sources else None


def _error_counts(records: Sequence[RequestRecord]) -> str:
    counts: dict[str, int] = {}
    for r in records:
        if r.error_kind:
            counts[r.error_kind] = counts.get(r.error_kind, 0) + 1
    return ";".join(f"{k}={v}" for k, v in sorted(counts.items()))
