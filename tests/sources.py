"""The rig's own Python sources, for the tests that read code: what git tracks, or would track,
under the folders given. An ignored folder inside them is not the rig's: an image's build
context staged under servers/ (scripts/build_images.sh puts text-generation-webui and its
packages in servers/textgen-cpu/) while another test reads the tree must not count."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def rig_sources(*folders: str) -> list[Path]:
    """Every .py file under ``folders`` (repository-relative) that git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z",
                             "--", *folders], cwd=REPO, capture_output=True, check=True).stdout
    return sorted(REPO / name for name in listed.decode().split("\0")
                  if name.endswith(".py") and (REPO / name).is_file())
