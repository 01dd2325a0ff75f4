"""python -m loadtest.inprocess ENGINE[:VARIANT] [options]: one in-process run (see runner.py)."""

import sys

from loadtest.inprocess.cli import main

sys.exit(main())
