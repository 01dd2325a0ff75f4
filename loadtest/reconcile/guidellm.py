"""GuideLLM's definitions, recomputed from the rig's records.

Follows guidellm 0.8.1 (PyPI; .venv-guidellm after scripts/install_peers.sh):
guidellm/schemas/base/request_stats.py (per-request figures), guidellm/backends/openai/http.py
(the timestamps), guidellm/schemas/base/statistics.py (`Percentiles.from_pdf`) and
guidellm/benchmark/schemas/accumulator.py (the run's window).

- TTFT: request start -> the first streamed line carrying text (`first_token_iteration`).
- request latency (E2E): start -> `request_end`, stamped when `[DONE]` is read (the rig reads
  on to the connection's end).
- ITL: per request (last text line - first text line) / (output_tokens - 1); first token out.
- TPOT: per request (last text line - request start) / output_tokens: the TTFT *included*.
- output tokens: usage (stream_options include_usage); when absent, the number of text lines.
- throughput: rates over the window from the first request's start to the last request's end.
- percentiles: nearest rank on the cumulative distribution (no interpolation); p0.1...p99.9.
"""

from __future__ import annotations

from loadtest.reconcile.figures import SAME_AS_RIG, Figure, distribution, nearest_rank
from loadtest.reconcile.run import Run, last_output_ns

__all__ = ["NAME", "SOURCE", "figures"]

NAME = "guidellm"
SOURCE = ("guidellm 0.8.1: guidellm/schemas/base/request_stats.py, schemas/base/statistics.py, "
          "backends/openai/http.py")

_RANK = "percentile by nearest rank (sorted[ceil(n x p) - 1]), not interpolated"


def figures(run: Run) -> dict[str, Figure]:
    done = run.done
    multi = [r for r in done if (r.output_tokens or 0) > 1]
    itl = [(last_output_ns(r) - r.first_chunk_ns) / 1e6 / (r.output_tokens - 1) for r in multi]
    tpot = [(last_output_ns(r) - r.sent_ns) / 1e6 / r.output_tokens
            for r in done if (r.output_tokens or 0) > 0]
    out: dict[str, Figure] = {}
    out.update(distribution("ttft", [r.ttft_ms for r in done], _RANK, nearest_rank))
    out.update(distribution("itl", itl, "per request (last token - first token) / (tokens - 1), "
                            "not pooled chunk gaps; " + _RANK, nearest_rank))
    out.update(distribution("tpot", tpot, "per request (last token - request start) / tokens: "
                            "the TTFT included; " + _RANK, nearest_rank))
    out.update(distribution("e2e", [r.e2e_ms for r in done], _RANK, nearest_rank))
    tokens = sum(r.output_tokens or 0 for r in done)
    duration_s = (run.end_ns - run.start_ns) / 1e9
    out["output_tokens"] = Figure(tokens, "usage, else text lines counted")
    out["duration_s"] = Figure(duration_s, f"first request start -> last request end {SAME_AS_RIG}")
    out["output_tok_per_s"] = Figure(tokens / duration_s, f"tokens / window {SAME_AS_RIG}")
    out["req_per_s"] = Figure(len(done) / duration_s, f"completed / window {SAME_AS_RIG}")
    return out
