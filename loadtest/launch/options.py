"""A run's options, registered once, and the one mapper from their values to arguments.

The locustfile adds them to Locust's parser and `rig run` to its own with the same function
(`add_locustfile_options`), so `rig run --help` lists exactly what `locust -f loadtest/engines.py`
accepts; `add_locust_options` declares the Locust options a run takes (`--host`, `--users`, ...)
for `rig run`. Every other command takes the ones it needs from here (`add_run_options`: the
same flag, help and check, the command's own defaults through `set_defaults`) instead of
declaring them again. `option_arguments` turns values of the locustfile's options, keyed by their
argparse dest, back into the arguments a Locust process parses.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Mapping
from functools import cache
from typing import Any

from loadtest.client.arrivals import add_arrival_options
from loadtest.client.bounds import add_bounds_options
from loadtest.client.options import CHECKS, add_options
from loadtest.live.progress import add_progress_option
from loadtest.client.timing import add_timing_options
from loadtest.cpus import add_pin_option
from loadtest.results.equivalence import add_keep_outputs_option
from loadtest.results.goodput import add_slo_option
from loadtest.toolkit.types import cpu_list
from loadtest.workload.options import add_workload_options

__all__ = ["RUNNING_ENGINE", "add_locust_options", "add_locustfile_options", "add_rig_options",
           "add_run_command_options",
           "add_run_options", "changed_options", "option_arguments", "option_dests",
           "run_defaults"]

# What --host, --flags and --gpu mean to a command that starts its engine unless given one (the
# `helps` of add_run_options).
RUNNING_ENGINE = {"host": "an engine already running at this URL: not started",
                  "flags": "with --host: the engine's flags, to record",
                  "gpu": "with --host: the engine's GPUs, to record"}


def add_locust_options(parser: Any) -> None:
    """Locust's own options that a run takes, as `rig run` declares them, each with its one
    check (loadtest/client/options.py CHECKS; loadtest/launch/checks.py sets the same on
    Locust's parser), and where the client runs."""
    locust = parser.add_argument_group("Locust")
    locust.add_argument("--host", type=CHECKS["host"], default=None,
                        help="the engine's base URL (default: the engine's own port on 127.0.0.1, "
                             "or its base URL variable for hosted engines)")
    locust.add_argument("--users", type=CHECKS["users"], default=1,
                        help="concurrent users, closed loop; with --rate the cap on requests in "
                             "flight (default 1)")
    locust.add_argument("--spawn-rate", type=CHECKS["spawn_rate"], default=None,
                        help="users started per second (Locust's default 1)")
    locust.add_argument("--processes", type=CHECKS["processes"], default=None,
                        help="Locust worker processes (the client's cores)")
    locust.add_argument("--client-cpus", type=cpu_list, default=None,
                        help="pin the client to these cores (taskset list, e.g. 0)")


def add_rig_options(parser: Any) -> None:
    """The rig's run options (engine, workload, open loop, goodput, outputs, bounds)."""
    add_options(parser)
    add_arrival_options(parser)
    add_slo_option(parser)
    add_keep_outputs_option(parser)
    add_workload_options(parser)
    add_bounds_options(parser)
    add_timing_options(parser)


def add_locustfile_options(parser: Any) -> None:
    """Every option the locustfile adds to Locust's parser, and `rig run` to its own: the run
    options, the client's --no-pin (loadtest/cpus.py) and the console's --progress-interval
    (loadtest/live/progress.py)."""
    add_rig_options(parser)
    add_pin_option(parser)
    add_progress_option(parser)


def add_run_command_options(parser: Any) -> None:
    """Every option `rig run` takes: Locust's that a run takes and the locustfile's."""
    add_locust_options(parser)
    add_locustfile_options(parser)


@cache
def _actions() -> tuple[argparse.Action, ...]:
    registrar = argparse.ArgumentParser(add_help=False)
    add_locustfile_options(registrar)
    return tuple(registrar._actions)


@cache
def _declared() -> dict[str, argparse.Action]:
    """Every option a command may take from here, by dest: Locust's and the locustfile's."""
    registrar = argparse.ArgumentParser(add_help=False)
    add_run_command_options(registrar)
    return {action.dest: action for action in registrar._actions}


def run_defaults(*dests: str) -> dict[str, Any]:
    """The locustfile's own defaults of options `dests`, each as its check reads it (256, not
    "256"; None where the default is "not given", such as --burstiness's ""): the values a run
    takes when a command or a sweep matrix leaves them out."""
    declared = _declared()
    return {dest: _typed(dest, declared[dest].default) for dest in dests}


def _typed(dest: str, default: Any) -> Any:
    if dest not in CHECKS or default is None:
        return default
    try:
        return CHECKS[dest](default)
    except ValueError:  # BadValue: "" for "not given"
        return None


def add_run_options(parser: Any, *dests: str, helps: Mapping[str, str] | None = None) -> None:
    """Declare the run options `dests` (argparse dests: "requests", "max_tokens") on a command's
    `parser` (or argument group) as they are declared here: the same flags, action and help,
    each value checked where it enters by the option's one check (CHECKS), so it travels typed.
    The command sets its own defaults afterwards with `parser.set_defaults(...)`; its help then
    ends "(default N)" with them (a RigParser's). `helps` words an option for a command where it
    means more there (a sweep's --host: an engine already running, not started)."""
    declared = _declared()
    unknown = [d for d in dests if d not in declared]
    if unknown:
        raise ValueError(f"not a run option: {', '.join(unknown)}")
    for dest in dests:
        action = copy.copy(declared[dest])
        action.type = CHECKS.get(dest, action.type)
        action.default = _typed(dest, action.default)
        action.help = (helps or {}).get(dest, action.help)
        action.show_default = True  # type: ignore[attr-defined]  # read by RigParser's help
        parser._add_action(action)


def option_dests() -> frozenset[str]:
    """The dest of every locustfile option (`max_tokens` for --max-tokens)."""
    return frozenset(action.dest for action in _actions())


def changed_options(args: argparse.Namespace | Mapping[str, Any]) -> dict[str, Any]:
    """The locustfile options of parsed `args` that differ from their defaults, by dest."""
    values = vars(args) if isinstance(args, argparse.Namespace) else args
    return {a.dest: values[a.dest] for a in _actions()
            if a.dest in values and values[a.dest] != a.default}


def option_arguments(options: Mapping[str, Any]) -> list[str]:
    """`options` ({dest: value}) as Locust arguments, in the registrar's order: nothing for
    None, a flag for a true switch (none for a false one), `--flag value` otherwise (`--flag=value`
    for an empty value or one that starts with "-", which argparse would take for an option),
    once per item of a list (an "append" option)."""
    unknown = set(options) - option_dests()
    if unknown:
        raise ValueError(f"not an option of the locustfile: {', '.join(sorted(unknown))}")
    out: list[str] = []
    for action in _actions():
        if options.get(action.dest) is None:  # left to the locustfile's default
            continue
        value, flag = options[action.dest], action.option_strings[-1]
        if action.nargs == 0:
            out += [flag] if value else []
            continue
        for text in map(_text, value if isinstance(value, (list, tuple)) else [value]):
            out += [f"{flag}={text}"] if not text or text.startswith("-") else [flag, text]
    return out


def _text(value: object) -> str:
    if not isinstance(value, float):
        return str(value)
    short = f"{value:g}"  # 4 for 4.0, as a user types it
    return short if float(short) == value else repr(value)
