"""python -m loadtest.sweep threads|flags ARGS: the two sweeps (see loadtest/sweep/__init__.py)."""

from __future__ import annotations

import sys

from loadtest.sweep import flags, threads

__all__: list[str] = []

if __name__ == "__main__":
    commands = {"threads": threads.main, "flags": flags.main}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print("usage: python -m loadtest.sweep threads ENGINE [...] | flags MATRIX.yaml [...]",
              file=sys.stderr)
        sys.exit(2)
    sys.exit(commands[sys.argv[1]](sys.argv[2:]))
