"""The rig's version as runs record it: the package version plus the git commit, `.dirty` when
tracked files differ from it. Kept apart from metadata.py so it imports no Locust."""

from __future__ import annotations

import subprocess

from loadtest import __version__
from loadtest.toolkit.repo import REPO

__all__ = ["rig_version"]


def rig_version() -> str:
    try:
        sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return __version__
    if not sha:
        return __version__
    return f"{__version__}+g{sha}{'.dirty' if dirty else ''}"
