"""The locustfile's options, registered once, and the one mapper from their values to arguments.

The locustfile adds them to Locust's parser and `rig run` to its own with the same function
(`add_locustfile_options`), so `rig run --help` lists exactly what `locust -f loadtest/engines.py`
accepts; `option_arguments` turns values of those options, keyed by their argparse dest, back
into the arguments a Locust process parses.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from functools import cache
from typing import Any

from loadtest.client.arrivals import add_arrival_options
from loadtest.client.bounds import add_bounds_options
from loadtest.client.options import add_options
from loadtest.client.progress import add_progress_option
from loadtest.client.timing import add_timing_options
from loadtest.cpus import add_pin_option
from loadtest.results.equivalence import add_keep_outputs_option
from loadtest.results.goodput import add_slo_option
from loadtest.workload.options import add_workload_options

__all__ = ["add_locustfile_options", "add_rig_options", "changed_options", "option_arguments",
           "option_dests"]


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
    (loadtest/client/progress.py)."""
    add_rig_options(parser)
    add_pin_option(parser)
    add_progress_option(parser)


@cache
def _actions() -> tuple[argparse.Action, ...]:
    registrar = argparse.ArgumentParser(add_help=False)
    add_locustfile_options(registrar)
    return tuple(registrar._actions)


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
