"""`python -m loadtest.race`: the same as `rig race` (loadtest/race/cli.py)."""

import sys

from loadtest.race.cli import main

sys.exit(main())
