"""python -m loadtest.sweep threads|flags|rates|matrix ARGS: `rig sweep ...` (loadtest/cli/main.py)."""

from __future__ import annotations

import sys

from loadtest.cli.main import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main(["sweep", *sys.argv[1:]]))
