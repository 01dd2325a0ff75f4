"""MLPerf LoadGen's server scenario, recomputed from the rig's records.

Follows mlcommons/inference loadgen/results.cc at 7ad9af18 (`ProcessLatencies`,
`ProcessTokenLatencies`, `LogSummary`); the SUT (the harness) reports the first token
(`FirstTokenComplete`) and the sample's end with its token count (`QuerySamplesComplete`).

- latencies count from the query's *scheduled* time (coordinated omission counted): in a
  closed-loop rig run that is the send, in an open-loop run (--rate) `scheduled_ns`.
- TTFT: scheduled -> the SUT's first-token call, here the first output chunk.
- latency: scheduled -> the sample completed, here the stream's end.
- TPOT: per sample (latency - TTFT) / (tokens - 1); its mean divides by the sample count.
- percentiles: the sorted values' element at floor(n * p) (no interpolation); the run's
  constraints read p99 TTFT and p99 TPOT.
- completed samples/s = (samples - 1) / (test start -> last sample done); completed
  tokens/s = tokens / the same span (no "- 1"). No inter-token latency.
"""

from __future__ import annotations

from loadtest.reconcile.figures import Figure, distribution, lower_rank
from loadtest.reconcile.run import Run

__all__ = ["NAME", "SOURCE", "figures"]

NAME = "mlperf"
SOURCE = "mlcommons/inference 7ad9af18: loadgen/results.cc (server scenario)"

_RANK = "percentile = sorted[floor(n x p)], not interpolated"


def figures(run: Run) -> dict[str, Figure]:
    done = run.done
    scheduled = {id(r): r.scheduled_ns if r.scheduled_ns is not None else r.sent_ns for r in done}
    since = "from the scheduled time (open loop: the client's queueing counted); " \
        if any(r.scheduled_ns is not None for r in done) else ""
    ttft = [(r.first_chunk_ns - scheduled[id(r)]) / 1e6 for r in done]
    latency = [(r.done_ns - scheduled[id(r)]) / 1e6 for r in done]
    tpot = [(lat - first) / (r.output_tokens - 1)
            for r, first, lat in zip(done, ttft, latency) if (r.output_tokens or 0) > 1]
    out: dict[str, Figure] = {}
    out.update(distribution("ttft", ttft, since + _RANK, lower_rank))
    out.update(distribution("tpot", tpot, since + _RANK, lower_rank))
    out.update(distribution("e2e", latency, since + _RANK, lower_rank))
    tokens = sum(r.output_tokens or 0 for r in done)
    span_s = (max(r.done_ns for r in done) - run.start_ns) / 1e9
    out["output_tokens"] = Figure(tokens, "the SUT's token count (usage here)")
    out["duration_s"] = Figure(span_s, "test start -> the last *completed* sample (failures out)")
    out["output_tok_per_s"] = Figure(tokens / span_s, "tokens / (start -> last sample done)")
    out["req_per_s"] = Figure((len(done) - 1) / span_s,
                              "(samples - 1) / span: the last sample's start is the open end")
    return out
