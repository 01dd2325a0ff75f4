"""One measured run, one way: a RunSpec describes it, `command` is the only place its Locust
arguments are built, and `run` the only launcher (own process group, deadline, safe stop, the
row found by run id).

This floor sits below the commands (loadtest/cli, loadtest/race, loadtest/sweep) and imports
nothing from them.
"""

from loadtest.launch.launcher import Launched, find_row, run, run_ids
from loadtest.launch.spec import RunSpec, command

__all__ = ["Launched", "RunSpec", "command", "find_row", "run", "run_ids"]
