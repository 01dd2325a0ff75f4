"""How one engine starts as a local process on this machine (no container).

A recipe is what differs between engines: the command line, the environment, the readiness
path, and what must be installed first. ``loadtest.local_engine.LocalEngine`` does the rest
(start in its own process group, wait for health, stop everything, keep the log).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["REPO", "LocalRecipe"]

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class LocalRecipe:
    """``command(port, extra_args)`` is the argv; ``missing()`` says, in one line naming the
    install step, why the engine cannot start here (None when it can). ``bind_compute(cpus)``
    is the environment that puts the engine's compute threads on those cores (a Linux CPU
    list, "1" or "0-3"), for engines that bind them themselves."""

    slug: str
    command: Callable[[int, list[str]], list[str]]
    missing: Callable[[], str | None]
    model_name: str
    env: dict[str, str] = field(default_factory=dict)
    health_path: str = "/health"
    bind_compute: Callable[[str], dict[str, str]] = lambda cpus: {}
