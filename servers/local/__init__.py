"""The engines the rig can start as local processes: a view of the engine specs' recipes.

    LOCAL["vllm-cpu"].command(8000, [])  -> the argv that serves the tiny model on port 8000

Each recipe lives in its engine's module (``servers/vllm_cpu.py``'s ``RECIPE``, ...).
"""

from __future__ import annotations

from servers.registry import SPECS
from servers.spec import LocalRecipe

__all__ = ["LOCAL", "LocalRecipe"]

LOCAL: dict[str, LocalRecipe] = {slug: s.local for slug, s in SPECS.items() if s.local is not None}
