"""python -m loadtest.sweep.threads ENGINE: the thread sweep (scripts/sweep_threads.sh).

    python -m loadtest.sweep.threads vllm-cpu --users 1,4,16,64 --repeats 2 --requests 64
    python -m loadtest.sweep.threads tgi --host http://127.0.0.1:8080 --users 24,64,128,256

The same fixed workload at each user count, R times each (a fresh Locust process per run),
after one warm-up run, then a table of completion time and output tok/s per user count with the
fastest and the knee marked. With --host the engine is one already running (not started or
stopped); without it the engine is started (as a local process where this machine has its
local build, servers/local/; else, or with --launch compose, as its docker-compose.yml service)
with the --set settings, and stopped at the end.
It is a flag sweep with one configuration: same resume, same records (OUT/sweeps/NAME/).
It refuses --until-known: its user counts are points on one engine's curve, not rivals in a heat
(`rig sweep flags --until-known` races configurations at each user count).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from servers.local import LOCAL

from servers.gpus import gpu_count
from loadtest.toolkit.args import RigParser, command_prog
from loadtest.launch.options import RUNNING_ENGINE, add_run_options
from loadtest.toolkit.types import (non_negative_int, positive_int, positive_int_list,
                                    writable_folder)
from loadtest.sweep.matrix import MatrixError, default_warmup_requests, parse_matrix

__all__ = ["main", "parser"]


def parser() -> RigParser:
    p = RigParser(prog=command_prog("python -m loadtest.sweep.threads"),
                  description="How many client threads saturate this engine?",
                  epilog="example:\n  rig sweep threads vllm-cpu --users 1,4,16,64 --repeats 2 --requests 64")
    p.add_argument("engine", help="engine slug (vllm-cpu, vllm, tgi, ...)")
    p.add_argument("--users", type=positive_int_list, default="24,64,128,256", help="user counts, comma-separated")
    p.add_argument("--repeats", type=positive_int, default="3", help="runs per user count (default 3)")
    add_run_options(p, "requests", "max_tokens", "prompts", "ignore_eos", "api", "slo", "host",
                    "flags", "gpu", helps=RUNNING_ENGINE)
    p.add_argument("--launch", choices=["local", "compose"], default=None,
                   help="how to start the engine (default: local where this machine has the engine's local "
                        "build, else compose)")
    p.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE",
                   help="engine setting for the started engine (servers/settings.py), repeatable")
    p.add_argument("--gpus", default="", help="GPU set for the started engine, e.g. 0 or 0,1")
    p.add_argument("--network", choices=["host"], default=None, help="compose: host networking")
    p.add_argument("--warmup-requests", type=non_negative_int, default=None,
                   help="requests in the warm-up run (default 2 x the largest user count, >= 16; 0 = none)")
    p.add_argument("--name", default="", help="sweep name: tag and folder (default threads-ENGINE)")
    p.add_argument("--out", type=writable_folder, default=Path("results"), help="results folder (default results/)")
    p.add_argument("--health-timeout", type=positive_int, default="900", help="seconds to wait for a started engine")
    p.add_argument("--run-timeout", type=positive_int, default="1800", help="seconds one run may take")
    p.add_argument("--dry-run", action="store_true", help="print every cell and command; start nothing")
    p.add_argument("--until-known", action=_NothingToCompare)
    return p


class _NothingToCompare(argparse.Action):
    """--until-known repeats a heat until its leader is known; a thread sweep has no rivals at a
    user count (one configuration), and the best of its user counts is the knee's question."""

    def __init__(self, option_strings: list[str], dest: str, **_: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help=argparse.SUPPRESS)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        parser.error("--until-known compares engine configurations at each user count, and a "
                     "thread sweep has one: use rig sweep flags with two or more")


def matrix_data(args: argparse.Namespace) -> dict[str, Any]:
    """The one-configuration matrix these options describe."""
    users = args.users
    if args.host:
        if args.set or args.launch or args.gpus or args.network:
            raise MatrixError("--host measures an engine already running: drop --set/--launch/--gpus/--network")
        entry: dict[str, Any] = {"engine": args.engine, "host": args.host, "flags": args.flags,
                                 "gpus": args.gpu}
    else:
        if args.flags or args.gpu:
            raise MatrixError("--flags/--gpu record a running engine's setup (with --host); "
                              "to start one with settings use --set SETTING=VALUE and --gpus")
        entry = {"engine": args.engine,
                 "launch": args.launch or _default_launch(args.engine),
                 "settings": _settings(args.set)}
        if args.gpus:
            entry["gpus"] = [args.gpus]
        if args.network:
            entry["network"] = args.network
    return {"name": args.name or f"threads-{args.engine}", "users": users, "repeats": args.repeats,
            "workload": {"prompts": args.prompts, "requests": args.requests,
                         "max_tokens": args.max_tokens, "ignore_eos": args.ignore_eos, "api": args.api,
                         **({"slo": args.slo} if args.slo else {})},
            "warmup_requests": _warmup(args.warmup_requests, users),
            "health_timeout_s": args.health_timeout, "run_timeout_s": args.run_timeout,
            "engines": [entry]}


def _settings(pairs: list[str]) -> dict[str, str]:
    settings = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise MatrixError(f"--set takes SETTING=VALUE (e.g. MAX_CONCURRENT_REQUESTS=64), got {pair!r}")
        settings[name] = value
    return settings


def _warmup(value: int | None, users: list[int]) -> int:
    return default_warmup_requests(tuple(users)) if value is None else value


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        data = matrix_data(args)
        launched = "host" not in data["engines"][0]
        gpus = gpu_count() if launched and not args.dry_run else None
        matrix = parse_matrix(data, gpus, where="thread sweep")
        from loadtest.sweep.runner import run_sweep  # pandas: once the options are good

        return run_sweep(matrix, args.out, kind="threads", dry_run=args.dry_run)
    except MatrixError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _default_launch(engine: str) -> str:
    """A local process where this machine can start one (servers/local/), else Compose."""
    return "local" if engine in LOCAL and LOCAL[engine].missing() is None else "compose"


if __name__ == "__main__":
    sys.exit(main())
