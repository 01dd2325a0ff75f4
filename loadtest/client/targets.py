"""The engines the client can drive: a view of the engine specs' client targets (servers/spec.py).

One slug per engine everywhere (compose service, servers/ module, `--engine`, results column).
"""

from __future__ import annotations

from types import ModuleType

from loadtest.client.protocols import openai, tgi
from servers.registry import SPECS
from servers.spec import Target

__all__ = ["Target", "TARGETS", "dialect_for"]

TARGETS: dict[str, Target] = {slug: s.target for slug, s in SPECS.items()}


def dialect_for(api: str) -> ModuleType:
    return tgi if api == "generate" else openai
