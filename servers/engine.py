"""What the rig knows about one engine: image, port, flags, refusals, container needs.

Each engine module (``servers/tgi.py``, ``servers/vllm.py``, ...) builds one
``Engine``. Adding an engine is one such module plus a line in
``servers/registry.py``; ``python -m servers.compose`` then writes its service.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Engine", "health_probe"]


@dataclass(frozen=True)
class Engine:
    """One inference engine as the rig starts it.

    ``flags`` maps a setting (see ``servers.settings``) to the engine's flag
    template; ``"{}"`` stands for the value. ``refused`` maps each setting the
    engine cannot take to the reason, and every flag setting is in exactly one
    of the two. ``defaults`` fill settings left empty (a setting that is empty
    and has no default is not passed at all). ``args`` come first on the
    command line; ``{HOST}`` and ``{PORT}`` in them are the ``HOST`` and
    ``PORT`` settings, for engines that listen on the host's network.
    """

    slug: str
    image: str
    image_source: str
    host_port: int
    container_port: int | None
    args: tuple[str, ...]
    flags: dict[str, tuple[str, ...]]
    refused: dict[str, str]
    defaults: dict[str, str] = field(default_factory=dict)
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    health_path: str = "/health"
    health_cmd: str = "python3"
    cache_dir: str = "/root/.cache/huggingface"
    gpu: bool = True
    arg_defaults: dict[str, str] = field(default_factory=dict)
    service: dict[str, Any] = field(default_factory=dict)


def health_probe(engine: Engine, port: str) -> list[str]:
    """The healthcheck ``test`` for ``engine``, probing its readiness path on ``port``."""
    url = f"http://127.0.0.1:{port}{engine.health_path}"
    if engine.health_cmd == "curl":
        return ["CMD", "curl", "-fsS", "-o", "/dev/null", url]
    code = f"import urllib.request as u; u.urlopen('{url}', timeout=5)"
    return ["CMD", "python3", "-c", code]
