"""llama.cpp in-process through llama-cpp-python, serving the same GGUF as llamacpp-cpu
(models/tiny-llama.gguf).

`scripts/install_inprocess.sh llama-cpp-python` installs the Python package without its native
build; its libllama is the shared library that scripts/build_llamacpp.sh links from the very
objects (one compile, Release, -march=native) of the llama-server the rig races, beside it in
build/llama.cpp/cpu/bin; LLAMA_CPP_LIB_PATH points the package at it. A package installed with
its own build (`pip install llama-cpp-python==0.3.36`) works too when LLAMA_CPP_LIB_PATH is unset.

`Llama.generate` yields one token id per decode step: each is stamped, and generation stops
after exactly `max_tokens` of them (generate itself never stops at EOS; the count is the ids the
engine returned). Greedy (temp 0). Context and threads follow the server's recipe
(servers/llamacpp_cpu.py): 2048 tokens, as many threads as the cores the worker may use
minus one, at least one. llama-cpp-python decodes one sequence at a time: batch 1 only.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from loadtest.inprocess.stamps import Missing, Stamps

__all__ = ["Adapter"]

INSTALL = "scripts/install_inprocess.sh llama-cpp-python"


class Adapter:
    def __init__(self, model: str, options: dict[str, Any], threads: int) -> None:
        try:
            import llama_cpp
        except (ImportError, OSError, RuntimeError) as exc:  # OSError: no libllama where pointed
            raise Missing(f"llama-cpp-python is not usable ({str(exc).splitlines()[0][:150]}): "
                          f"run {INSTALL}") from None
        if not os.path.exists(model):
            raise Missing(f"no GGUF model at {model}: run scripts/build_llamacpp.sh")
        n_threads = threads or max(1, (os.cpu_count() or 2) - 1)
        self.llm = llama_cpp.Llama(model_path=model, n_ctx=int(options.get("n_ctx", 2048)),
                                   n_threads=n_threads, n_threads_batch=n_threads, seed=0,
                                   verbose=False)
        self.version = llama_cpp.__version__
        self.settings = {"n_ctx": int(options.get("n_ctx", 2048)), "n_threads": n_threads,
                         "lib": os.environ.get("LLAMA_CPP_LIB_PATH", "bundled")}

    def run(self, requests: list[dict[str, Any]], batch: int,
            emit: Callable[[dict[str, Any]], None]) -> None:
        if batch != 1:
            raise ValueError("llama-cpp-python decodes one sequence at a time: batch 1 only")
        for request in requests:
            stamps = Stamps(request)
            tokens = self.llm.tokenize(request["text"].encode("utf-8"), add_bos=True)
            count = 0
            for _ in self.llm.generate(tokens, temp=0.0, top_k=1, top_p=1.0, min_p=0.0):
                stamps.output()
                count += 1
                if count == request["max_tokens"]:
                    break
            emit(stamps.record(done_ns=time.perf_counter_ns(), prompt_tokens=len(tokens),
                               output_tokens=count, finish_reason="length"))
