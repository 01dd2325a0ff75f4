"""LLMPerf's definitions (`token_benchmark_ray.py`), recomputed from the rig's records.

Follows ray-project/llmperf at f1d6bed (2024-12-08, the last commit; unmaintained):
token_benchmark_ray.py (`get_token_throughput_latencies`, `metrics_summary`) and
src/llmperf/ray_clients/openai_chat_completions_client.py (@0451d33, its newest version).

- TTFT: request sent -> the first chunk whose delta.content is non-empty (chat only).
- inter-token latency: per request, the sum of every gap between content chunks *including
  the TTFT* (so: the last content chunk's time), divided by `tokens_received`, which counts
  every data line but [DONE] — chat's role announcement and a finish-only chunk included.
  Then quantiles over requests.
- E2E: sent -> the stream's end (after [DONE]).
- output tokens: the answer's text re-tokenized with one Llama tokenizer for every model
  (`LlamaTokenizerFast` "hf-internal-testing/llama-tokenizer", `encode`, so BOS is counted).
- overall output throughput: tokens / (threads started -> all joined); requests per minute.
- quantiles: pandas `Series.quantile` (linear) p25...p99, and the mean.
"""

from __future__ import annotations

from loadtest.reconcile.figures import SAME_AS_RIG, Figure, distribution
from loadtest.reconcile.run import Run, last_output_ns

__all__ = ["NAME", "SOURCE", "figures"]

NAME = "llmperf"
SOURCE = ("ray-project/llmperf f1d6bed: token_benchmark_ray.py, "
          "ray_clients/openai_chat_completions_client.py")

_TOKENS_HOW = ("re-tokenizes the text with a Llama tokenizer and encode() adds BOS: the rig "
               "keeps no text, so usage + 1 per request stands in")


def figures(run: Run) -> dict[str, Figure]:
    done = run.done
    extra_lines = 1 if run.chat else 0  # chat's role announcement is a data line too
    itl = [(last_output_ns(r) - r.sent_ns) / 1e6 / (r.output_chunks + extra_lines)
           for r in done if r.output_chunks + extra_lines > 0]
    out: dict[str, Figure] = {}
    out.update(distribution("ttft", [r.ttft_ms for r in done],
                            "" if run.chat else "reads chat only (delta.content)"))
    out.update(distribution("itl", itl, "per request: (TTFT + every gap) / data lines read, the "
                            "TTFT included and the role announcement counted"))
    out.update(distribution("e2e", [r.e2e_ms for r in done], ""))
    tokens = sum((r.output_tokens or 0) + 1 for r in done)
    duration_s = (run.end_ns - run.start_ns) / 1e9
    out["output_tokens"] = Figure(tokens, _TOKENS_HOW)
    out["duration_s"] = Figure(duration_s, f"threads started -> all joined {SAME_AS_RIG}")
    out["output_tok_per_s"] = Figure(tokens / duration_s, _TOKENS_HOW)
    out["req_per_s"] = Figure(len(done) / duration_s, "reports per minute: shown per second")
    return out
