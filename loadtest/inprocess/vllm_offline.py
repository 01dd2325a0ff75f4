"""vLLM's offline engine in-process: the `LLM` class (here the CPU build, in .venv-vllm).

`LLM.generate` runs `llm_engine.step()` until every request is done; this adapter runs the same
loop itself so that it can stamp each step's new tokens (requests added with
`RequestOutputKind.DELTA`: a step's output holds only the tokens it made), and so that batch B
is a closed loop like B users of a server: B requests in flight, the next one added as soon as
one finishes. Greedy, `ignore_eos`, exactly `max_tokens` tokens; the count is the ids the engine
returned. Engine settings are the server's (servers/vllm_cpu.py): bfloat16, max_model_len
2048, 2048 batched tokens and 256 sequences per step (the server's defaults; the LLM class
defaults to more), VLLM_CPU_KVCACHE_SPACE from the environment the rig sets.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from loadtest.inprocess.stamps import Missing, Stamps

__all__ = ["Adapter"]


class Adapter:
    def __init__(self, model: str, options: dict[str, Any], threads: int) -> None:
        try:
            import vllm
            from vllm import LLM, SamplingParams
            from vllm.sampling_params import RequestOutputKind
        except ImportError as exc:
            raise Missing(f"vllm is not importable here ({exc}): run scripts/install.sh "
                          "(it makes .venv-vllm)") from None
        self.SamplingParams, self.kind = SamplingParams, RequestOutputKind.DELTA
        # The server's settings (servers/vllm_cpu.py and vLLM's OPENAI_API_SERVER batch
        # defaults off H100-class GPUs): the LLM class would otherwise take 8192 batched tokens.
        self.settings = {"dtype": options.get("dtype", "bfloat16"),
                         "max_model_len": int(options.get("max_model_len", 2048)),
                         "max_num_batched_tokens": int(options.get("max_num_batched_tokens", 2048)),
                         "max_num_seqs": int(options.get("max_num_seqs", 256)),
                         # :eager, the server's --enforce-eager: no torch.compile warm-up
                         "enforce_eager": bool(options.get("enforce_eager", False))}
        self.llm = LLM(model=model, seed=0, **self.settings)
        self.engine = self.llm.llm_engine
        self.version = vllm.__version__

    def run(self, requests: list[dict[str, Any]], batch: int,
            emit: Callable[[dict[str, Any]], None]) -> None:
        pending = list(reversed(requests))
        live: dict[str, tuple[Stamps, list[int]]] = {}

        def add() -> None:
            request = pending.pop()
            params = self.SamplingParams(temperature=0.0, max_tokens=request["max_tokens"],
                                         ignore_eos=True, output_kind=self.kind)
            stamps = Stamps(request)
            rid = f"r{request['request_id']}"
            live[rid] = (stamps, [0, 0])  # output tokens, prompt tokens
            internal = self.engine.add_request(rid, request["text"], params)
            live[internal] = live[rid]  # outputs carry one id or the other, by vLLM version

        while pending and len({id(v[0]) for v in live.values()}) < batch:
            add()
        while live:
            outputs = self.engine.step()
            now = time.perf_counter_ns()
            for output in outputs:
                stamps, counts = live[output.request_id]
                new = len(output.outputs[0].token_ids) if output.outputs else 0
                if new:
                    counts[0] += new
                    stamps.output(now)
                if output.prompt_token_ids is not None:
                    counts[1] = len(output.prompt_token_ids)
                if output.finished:
                    for key in [k for k, v in live.items() if v[0] is stamps]:
                        del live[key]
                    emit(stamps.record(done_ns=now, prompt_tokens=counts[1] or None,
                                       output_tokens=counts[0],
                                       finish_reason=output.outputs[0].finish_reason))
                    if pending:
                        add()

    def close(self) -> None:
        shutdown = getattr(self.engine, "engine_core", None)
        if shutdown is not None and hasattr(shutdown, "shutdown"):
            shutdown.shutdown()
