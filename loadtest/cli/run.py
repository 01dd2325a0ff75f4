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
from collections.abc import Sequence

from loadtest.client.options import ConfigError
from loadtest.cpus import check_client_cores, cpu_set
from loadtest.launch import RunSpec, command
from loadtest.launch.checks import check_run_options
from loadtest.launch.options import add_run_command_options
from loadtest.toolkit.args import RigParser, command_prog
from loadtest.workload import WorkloadError

__all__ = ["checked_args", "main", "parser"]


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
    add_run_command_options(p)
    return p


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
        if args.client_cpus and args.processes:  # each process a core (loadtest/cpus.py)
            check_client_cores(cpu_set(args.client_cpus), args.processes,
                               f"--client-cpus {args.client_cpus}")
    except (ConfigError, WorkloadError, ValueError) as exc:
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
