"""Why tools disagree: a run the rig made, recomputed under each peer tool's published
definitions (one module per peer, each naming the file and version it follows), and the peers
themselves run on the same workload (peers.py)."""

from __future__ import annotations

from types import ModuleType

from loadtest.reconcile import aiperf, guidellm, llmperf, mlperf, vllm

__all__ = ["DEFINITIONS"]

DEFINITIONS: dict[str, ModuleType] = {m.NAME: m for m in (vllm, aiperf, guidellm, llmperf, mlperf)}
