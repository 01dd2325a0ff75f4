"""Engines the rig can start as local processes, one recipe module per engine.

    LOCAL["vllm-cpu"].command(8000, [])  -> the argv that serves the tiny model on port 8000
"""

from __future__ import annotations

from servers.local import llamacpp, llamacpp_cpu, transformers, vllm_cpu
from servers.local.recipe import LocalRecipe

__all__ = ["LOCAL", "LocalRecipe"]

LOCAL: dict[str, LocalRecipe] = {
    r.slug: r for r in (vllm_cpu.RECIPE, llamacpp_cpu.RECIPE, transformers.RECIPE, llamacpp.RECIPE)
}
