"""Workloads: what the rig sends, built and checked before anything is sent.

One module per source (prompts, synthetic, datasets, prefixes, trace, conversations, agentic
traces), the LoRA adapter mix over any single-turn source (lora.py), their options in options.py, and build_workload (build.py), the one entry every caller uses. The
contract the client codes against is spec.py.
"""

from loadtest.workload.build import build_workload
from loadtest.workload.options import WorkloadOptions, add_workload_options, workload_options
from loadtest.workload.prompts import Prompt, load_prompts, resolve_prompts
from loadtest.workload.spec import RequestSpec, SessionSpec, TurnSpec, Workload, WorkloadError

__all__ = ["Prompt", "RequestSpec", "SessionSpec", "TurnSpec", "Workload", "WorkloadError",
           "WorkloadOptions", "add_workload_options", "build_workload", "load_prompts",
           "resolve_prompts", "workload_options"]
