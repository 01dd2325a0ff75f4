"""Workloads: what the rig sends, built and checked before anything is sent.

One module per source (prompts, synthetic, datasets, prefixes, trace, conversations, agentic
traces), the LoRA adapter mix over any single-turn source (lora.py), their options in options.py
(checked into a WorkloadOptions: chosen.py), and build_workload (build.py), the one entry every
caller uses. The contract the client codes against is spec.py, which imports none of the others:
no module here imports one that imports it back (tests/test_layers.py).

The names below are imported on first use (PEP 562): registering the workload's options
(options.py) needs nothing outside the standard library, so scripts/demo.sh can check a run's
options with a bare python3 before it installs numpy and tokenizers, which building needs.
"""

from importlib import import_module
from typing import Any

__all__ = ["Prompt", "RequestSpec", "SessionSpec", "TurnSpec", "Workload", "WorkloadError",
           "WorkloadOptions", "add_workload_options", "build_workload", "load_prompts",
           "resolve_prompts", "workload_options"]

_HOME = {"build_workload": "build", "WorkloadOptions": "chosen", "add_workload_options": "options",
         "workload_options": "options", "Prompt": "prompts", "load_prompts": "prompts",
         "resolve_prompts": "prompts", "RequestSpec": "spec", "SessionSpec": "spec",
         "TurnSpec": "spec", "Workload": "spec", "WorkloadError": "spec"}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value
