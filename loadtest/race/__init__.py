"""The race: local engines one after another on the same workload, and which is fastest.

    python -m loadtest.race [--engines E,E] [--out DIR] [USERS [REQUESTS]] [-- RUN OPTIONS]

`plan` decides the heats and who runs what in which order (pure), `known` whether a heat's
leader is known and who runs it again until it is (pure, --until-known), `execute` starts the engines
and runs the locustfile, `args` reads the command line and `cli` ties them together.
scripts/demo.sh installs, then runs it.
"""

from loadtest.race.args import parser
from loadtest.race.cli import main

__all__ = ["main", "parser"]
