"""The images the rig builds here, by name: each engine's from its spec, and the two beside them.

    python -m servers.images      # one line each: NAME IMAGE (scripts/build_images.sh reads it)

    base llm-load-rig/base:bookworm
    llamacpp-cpu llm-load-rig/llamacpp-cpu:0.3.36
    ...

An engine's image is built here when its Compose service has a ``build``
(``servers/vllm-cpu/``, ...): its NAME is that build folder's name (``transformers-cpu`` for the
``transformers`` engine), its IMAGE the spec's pinned ``Engine.image``, the tag Compose runs.
Three images are no engine's: ``base`` (Debian bookworm and python3, the engines' images are
built on it), ``nginx`` (the balancer's, ``LB_IMAGE`` in CI) and ``rig`` (the rig itself, tagged
with its version: ``rig k8s`` runs its pods on it).

Standard library only (the script asks it with the machine's python3).
"""

from __future__ import annotations

import re
import sys
from pathlib import PurePosixPath

from loadtest.toolkit.repo import REPO
from servers.registry import SPECS

__all__ = ["BASE_IMAGE", "NGINX_IMAGE", "RIG_IMAGE", "engine_images", "local_images", "main"]

BASE_IMAGE = "llm-load-rig/base:bookworm"
NGINX_IMAGE = "llm-load-rig/nginx:bookworm"


def _rig_version() -> str:
    """The project's version, as pyproject.toml gives it (one place for it)."""
    text = (REPO / "pyproject.toml").read_text()
    return re.search(r'^version = "([^"]+)"', text, re.MULTILINE).group(1)  # type: ignore[union-attr]


RIG_IMAGE = f"llm-load-rig/rig:{_rig_version()}"


def engine_images() -> dict[str, str]:
    """Build folder name -> image, for every engine whose image is built here, in spec order."""
    found: dict[str, str] = {}
    for spec in SPECS.values():
        container = spec.container
        if container is not None and container.service.get("build"):
            found[PurePosixPath(container.service["build"]["context"]).name] = container.image
    return found


def local_images() -> dict[str, str]:
    """Every image scripts/build_images.sh builds: NAME -> name:tag, the base first."""
    return {"base": BASE_IMAGE, **engine_images(), "nginx": NGINX_IMAGE, "rig": RIG_IMAGE}


def main(argv: list[str] | None = None) -> int:
    if sys.argv[1:] if argv is None else argv:
        print("usage: python -m servers.images", file=sys.stderr)
        return 2
    for name, image in local_images().items():
        print(name, image)
    return 0


if __name__ == "__main__":
    sys.exit(main())
