"""AIPerf's definitions, recomputed from the rig's records.

Follows aiperf 0.13.0 (PyPI; .venv-aiperf after scripts/install_peers.sh):
aiperf/metrics/types/ttft_metric.py, request_latency_metric.py,
inter_token_latency_metric.py, inter_chunk_latency_metric.py, benchmark_duration_metric.py,
output_token_throughput_metrics.py, request_throughput_metric.py, aiperf/metrics/metric_dicts.py
(percentiles), aiperf/records/inference_result_parser.py (token counts).

- TTFT: request start -> the first *content* response (a chunk with non-empty text).
- request latency (E2E): start -> the last content response; usage-only chunks, [DONE] and the
  close do not count.
- ITL ("inter token latency"): per request (latency - TTFT) / (OSL - 1), requests of 2+
  tokens; the pooled chunk gaps are its separate "inter chunk latency".
- OSL: the answer's text counted with the client's tokenizer (add_special_tokens=False);
  server usage only with --use-server-token-count.
- benchmark duration: the first request's start -> the last content response (no drain past
  the last token); output token throughput = total OSL / duration; request throughput = valid
  requests / duration.
- percentiles: linear interpolation (p1...p99), with avg, min, max, std.
"""

from __future__ import annotations

from loadtest.reconcile.figures import Figure, distribution
from loadtest.reconcile.run import Run, last_output_ns

__all__ = ["NAME", "SOURCE", "figures"]

NAME = "aiperf"
SOURCE = "aiperf 0.13.0: aiperf/metrics/types/*_metric.py, metrics/metric_dicts.py"

_E2E_HOW = "ends at the last content chunk, not the stream's end"
_TOKENS_HOW = ("counts the text with the client's tokenizer; the rig keeps no text, so usage "
               "stands in (equal where the tokenizer round-trips)")


def figures(run: Run) -> dict[str, Figure]:
    done = run.done
    latency = {id(r): (last_output_ns(r) - r.sent_ns) / 1e6 for r in done}
    itl = [(latency[id(r)] - r.ttft_ms) / (r.output_tokens - 1)
           for r in done if (r.output_tokens or 0) > 1]
    out: dict[str, Figure] = {}
    out.update(distribution("ttft", [r.ttft_ms for r in done],
                            "the first chunk with non-empty text (the rig: any token chunk)"))
    out.update(distribution("itl", itl, "per request (latency - TTFT) / (tokens - 1), latency "
                            f"{_E2E_HOW}: the rig's TPOT-like figure, not pooled chunk gaps; "
                            "its tokens are its tokenizer's count (usage here)"))
    out.update(distribution("tpot", itl, "AIPerf has no TPOT: its ITL is this figure, with "
                            f"latency {_E2E_HOW}"))
    out.update(distribution("e2e", list(latency.values()), _E2E_HOW))
    tokens = sum(r.output_tokens or 0 for r in done)
    end_ns = max(last_output_ns(r) for r in done)
    duration_s = (end_ns - min(r.sent_ns for r in done)) / 1e9
    duration_how = "first request -> last content chunk (no drain; failed requests left out)"
    out["output_tokens"] = Figure(tokens, _TOKENS_HOW)
    out["duration_s"] = Figure(duration_s, duration_how)
    out["output_tok_per_s"] = Figure(tokens / duration_s, duration_how)
    out["req_per_s"] = Figure(len(done) / duration_s, duration_how)
    return out
