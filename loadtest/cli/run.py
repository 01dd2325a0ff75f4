"""`rig run`: one fixed workload against one engine (the locustfile, loadtest/engines.py).

The rig's options are registered on Locust's parser by the locustfile through
`add_locustfile_options`, and on `rig run`'s parser by the same function, so `rig run --help`
lists exactly what `locust -f loadtest/engines.py` accepts. (Locust prints its `--help` before
it imports a locustfile, so `locust ... --help` cannot show them.) `rig run` checks every option
the way the locustfile will (one `error:` line, exit 2, nothing started), then replaces itself
with the Locust process, so signals and the exit code are Locust's own.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from loadtest.cli.args import RigParser, command_prog, refuse_argument
from loadtest.cli.types import cpu_list, positive_int, positive_number, url
from loadtest.client.options import ConfigError, RunConfig, config_from_options
from loadtest.client.progress import progress_interval_s
from loadtest.client.timing import timing_from_options
from loadtest.launch import RunSpec, command
from loadtest.launch.options import add_locustfile_options, add_rig_options
from loadtest.workload import WorkloadError, workload_options

__all__ = ["LOCUST_TYPES", "add_locustfile_options", "add_rig_options", "check_locust_parser",
           "check_run_options", "checked_args", "main", "parser"]

# Locust's own options that a run takes, each with the one type that checks it: `rig run`'s
# parser declares them with it, and the locustfile sets it on Locust's parser
# (check_locust_parser), so `locust -f loadtest/engines.py` refuses what `rig run` refuses, in
# the same words.
LOCUST_TYPES: dict[str, Callable[[object], Any]] = {
    "--host": url, "--users": positive_int, "--spawn-rate": positive_number,
    "--processes": positive_int}

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


def parser() -> RigParser:
    p = RigParser(
        prog=command_prog("rig run"),
        description="Run one fixed workload against one engine and record every request "
                    "(the locustfile loadtest/engines.py under Locust, headless).",
        epilog="example:\n  rig run --engine vllm-cpu --host http://127.0.0.1:8000 --users 32 "
               "--requests 256 --max-tokens 128\n\n"
               "Locust's own options go after --:\n"
               "  rig run --engine vllm-cpu --users 8 -- --loglevel DEBUG\n"
               "exit: 0 every request ok, 1 some failed (recorded), 2 bad input or the rig could "
               "not run")
    locust = p.add_argument_group("Locust")
    locust.add_argument("--host", type=LOCUST_TYPES["--host"], default=None,
                        help="the engine's base URL (default: the engine's own port on 127.0.0.1, "
                             "or its base URL variable for hosted engines)")
    locust.add_argument("--users", type=LOCUST_TYPES["--users"], default=1,
                        help="concurrent users, closed loop; with --rate the cap on requests in "
                             "flight (default 1)")
    locust.add_argument("--spawn-rate", type=LOCUST_TYPES["--spawn-rate"], default=None,
                        help="users started per second (Locust's default 1)")
    locust.add_argument("--processes", type=LOCUST_TYPES["--processes"], default=None,
                        help="Locust worker processes (the client's cores)")
    locust.add_argument("--client-cpus", type=cpu_list, default=None,
                        help="pin the client to these cores (taskset list, e.g. 0)")
    add_locustfile_options(p)
    return p


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


def checked_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """`rig run`'s options, checked as the locustfile will check them, and the Locust options
    after `--`; exits 2 with one `error:` line on bad input (nothing started, nothing written)."""
    argv = list(argv)
    locust_extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, locust_extra = argv[:cut], argv[cut + 1:]
    p = parser()
    args = p.parse_args(argv)
    args.num_users = args.users  # the name Locust gives it, which the checks read
    try:
        check_run_options(args, args.host)
    except (ConfigError, WorkloadError) as exc:
        p.error(str(exc))
    return args, locust_extra


def main(argv: list[str] | None = None) -> int:
    args, locust_extra = checked_args(sys.argv[1:] if argv is None else argv)
    cmd = command(RunSpec.from_options(
        args, host=args.host or "", users=args.users, spawn_rate=args.spawn_rate,
        processes=args.processes, cpus=args.client_cpus, locust_options=tuple(locust_extra)))
    sys.stdout.flush()
    os.execvp(cmd[0], cmd)
    return 0  # not reached
