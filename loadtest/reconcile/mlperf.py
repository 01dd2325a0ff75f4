"""MLPerf LoadGen's server scenario with token latencies, recomputed from the rig's records.

Follows mlcommons/inference b66003e1 (LoadGen 6.0.17; the metric code below is unchanged since
7ad9af18, LoadGen 5.0.16):

- loadgen/loadgen.cc `ResponseDelegateDetailed::SampleComplete` and `TokenComplete`: a
  sample's latency and its first-token latency (TTFT) are `complete_begin_time -
  query->scheduled_time`, whole nanoseconds (int64 `QuerySampleLatency`): counted from the
  *scheduled* time, so a late issue counts (no coordinated omission).
- loadgen/logging.cc `AsyncLog::RecordSampleCompletion`: TPOT per sample = (latency - TTFT) /
  (n_tokens - 1) in int64, the quotient truncated toward zero. n_tokens is the SUT's count,
  given to `QuerySamplesComplete` (the reference SUTs pass the generated token ids, the first
  token included: language/llama2-70b/SUT.py). A count of 1 is logged as an error ("Number of
  tokens need to be greater than 1") and set to 0; a count of 0 is logged and stays 0: such a
  sample's TPOT is then (latency - TTFT) / -1, negative, its tokens count 0, and both stay in
  the results.
- loadgen/results.cc `ProcessLatencies`, `ProcessTokenLatencies`: each mean is the int64 sum
  / the sample count (truncated); each percentile is the sorted values' element at index
  (size_t)(sample_count * p), p one of .50 .90 .95 .97 .99 .999 (no interpolation); the
  server's TTFT and TPOT constraints read p = the target percentile (.99).
- loadgen/results.cc `LogSummary` (server): completed samples/s = (samples - 1) /
  final_query_all_samples_done_time, completed tokens/s = token count / the same time;
  loadgen.cc takes that time from the test's start to the completion of the *last issued*
  query (`queries[queries_issued - 1]`), which need not be the last to complete.

Here: a sample's schedule is the rig's `scheduled_ns` in an open-loop run (--rate), else its
send; the test's start the earliest of those and the first send; the first token the first
output chunk; the sample's completion the stream's end; n_tokens the server's usage count.
Failed requests, which LoadGen has no place for, are left out. LoadGen has no inter-token
latency.
"""

from __future__ import annotations

from collections.abc import Sequence

from loadtest.reconcile.figures import Figure
from loadtest.reconcile.run import Run
from loadtest.results.record import RequestRecord

__all__ = ["NAME", "SOURCE", "figures", "sample_tpot_ns"]

NAME = "mlperf"
SOURCE = ("mlcommons/inference b66003e1 (LoadGen 6.0.17): loadgen/logging.cc "
          "RecordSampleCompletion, loadgen/results.cc ProcessTokenLatencies and LogSummary "
          "(server scenario)")

_HOW = ("whole ns, mean = sum / n truncated, percentile = sorted[int(n x p)] (not "
        "interpolated)")


def _c_div(numerator: int, denominator: int) -> int:
    """C++'s int64 division: the quotient truncated toward zero (Python's // floors)."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator < 0) == (denominator < 0) else -quotient


def _loadgen_tokens(record: RequestRecord) -> int:
    """n_tokens as LoadGen keeps it: the SUT's count, 0 where it was below 2 (an error)."""
    tokens = record.output_tokens or 0
    return tokens if tokens > 1 else 0


def sample_tpot_ns(latency_ns: int, ttft_ns: int, n_tokens: int) -> int:
    """logging.cc: (latency - TTFT) / (n_tokens - 1), int64, with n_tokens already as LoadGen
    keeps it (0 for a count below 2, which makes this negative)."""
    return _c_div(latency_ns - ttft_ns, n_tokens - 1)


def _distribution(metric: str, values_ns: Sequence[int], how: str) -> dict[str, Figure]:
    """results.cc: mean and percentiles over the sample count, in ms for the table."""
    ordered = sorted(values_ns)
    count = len(ordered)
    mean_ns = _c_div(sum(ordered), count)
    return {f"{metric}_mean_ms": Figure(mean_ns / 1e6, how),
            f"{metric}_p50_ms": Figure(ordered[int(count * 0.50)] / 1e6, how),
            f"{metric}_p99_ms": Figure(ordered[int(count * 0.99)] / 1e6, how)}


def figures(run: Run) -> dict[str, Figure]:
    done = run.done
    scheduled = [r.scheduled_ns if r.scheduled_ns is not None else r.sent_ns for r in done]
    since = "from the scheduled time (the client's queueing counted); " \
        if any(r.scheduled_ns is not None for r in done) else ""
    ttft = [r.first_chunk_ns - at for r, at in zip(done, scheduled)]
    latency = [r.done_ns - at for r, at in zip(done, scheduled)]
    tokens = [_loadgen_tokens(r) for r in done]
    tpot = [sample_tpot_ns(lat, first, n) for lat, first, n in zip(latency, ttft, tokens)]
    short = sum(1 for n in tokens if n == 0)
    tpot_how = "per sample (latency - TTFT) / (tokens - 1) truncated, " + _HOW
    if short:
        tpot_how += (f"; {short} sample(s) of fewer than 2 tokens: LoadGen logs an error for "
                     "each, counts its tokens as 0 and its TPOT as -(latency - TTFT)")
    out: dict[str, Figure] = {}
    out.update(_distribution("ttft", ttft, since + _HOW))
    out.update(_distribution("tpot", tpot, since + tpot_how))
    out.update(_distribution("e2e", latency, since + _HOW))
    start_ns = min(run.start_ns, *scheduled)
    last_issued = max(range(len(done)), key=lambda i: (scheduled[i], done[i].request_id))
    span_s = (done[last_issued].done_ns - start_ns) / 1e9
    token_count = sum(tokens)
    count_how = "the SUT's count (usage here)" + (
        f", 0 for the {short} sample(s) below 2 tokens" if short else "")
    out["output_tokens"] = Figure(token_count, count_how)
    out["duration_s"] = Figure(span_s, "test start -> the *last issued* sample's completion "
                                       "(not the latest completion; failures out)")
    out["output_tok_per_s"] = Figure(token_count / span_s, "tokens / (start -> the last issued "
                                                           "sample's completion)")
    out["req_per_s"] = Figure((len(done) - 1) / span_s,
                              "(samples - 1) / span: the last sample's start is the open end")
    return out
