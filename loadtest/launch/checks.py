"""The same checks for every way a run starts: `locust -f loadtest/engines.py`, `rig run`, and
every command that launches a RunSpec.

LOCUST_TYPES gives Locust's own options the one type that checks each; the locustfile sets them
on Locust's parser (check_locust_parser) and `rig run` declares them with them, so both refuse
the same values in the same words. check_run_options makes every check of the rig's own options
that needs no engine, the one the locustfile makes before it asks the engine anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadtest.client.options import CHECKS, RunConfig, config_from_options
from loadtest.live.progress import progress_interval_s
from loadtest.client.timing import timing_from_options
from loadtest.toolkit.args import refuse_argument
from loadtest.workload import workload_options

__all__ = ["LOCUST_TYPES", "check_locust_parser", "check_run_options"]

# Locust's own options that a run takes, each with the one check of its value (CHECKS): `rig
# run`'s parser declares them with it (loadtest/launch/options.py add_locust_options), and the
# locustfile sets it on Locust's parser (check_locust_parser), so `locust -f loadtest/engines.py`
# refuses what `rig run` refuses, in the same words.
LOCUST_TYPES: dict[str, Callable[[object], Any]] = {
    f"--{dest.replace('_', '-')}": CHECKS[dest]
    for dest in ("host", "users", "spawn_rate", "processes")}


def check_locust_parser(locust_parser: Any) -> None:
    """Locust's parser (the locustfile's init_command_line_parser hook) made to check as `rig
    run` does: LOCUST_TYPES on Locust's own options, and any bad argument one `error:` line and
    exit 2 (argparse prints its whole usage first). Locust's --processes -1 (one per core) goes
    with it, as it does in `rig run`: the client's processes are counted, never guessed."""
    for action in locust_parser._actions:
        for option in action.option_strings:
            if option in LOCUST_TYPES:
                action.type = LOCUST_TYPES[option]
    locust_parser.error = lambda message: refuse_argument(message, "rig run")


def check_run_options(options: Any, host: str | None) -> RunConfig:
    """Every check of the run's options that needs no engine (the locustfile makes the same
    ones before it asks the engine anything); ConfigError or WorkloadError, one line."""
    from loadtest.client.run import run_options  # imports Locust (gevent's patches): only here

    config = config_from_options(options, host)
    run_options(options)  # open loop, --slo, --keep-outputs
    timing_from_options(options)  # --duration, its window, --stages
    workload_options(options)  # the workload's own options
    progress_interval_s(options)  # the console's progress line
    return config
