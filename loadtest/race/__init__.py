"""The race: local engines one after another on the same workload, and which is fastest.

    python -m loadtest.race [--engines E,E] [--out DIR] [USERS [REQUESTS]] [-- RUN OPTIONS]

`plan` decides the heats and who runs what in which order (pure), `execute` starts the engines
and runs the locustfile, `args` reads the command line and `cli` ties them together.
scripts/demo.sh installs, then runs it.
"""

from loadtest.race.args import parser
from loadtest.race.cli import main

__all__ = ["main", "parser"]
