"""--until-known and its caps, one set of options for the race and the sweeps (the rule they
ask for: loadtest/known.py)."""

from __future__ import annotations

import argparse

from loadtest.toolkit.types import duration, percent, positive_int
from loadtest.known import DEFAULT_MAX_REPEATS

__all__ = ["CAPS", "add_until_known", "check_caps"]

CAPS = ("--max-repeats", "--max-time", "--resolve-pct")  # each goes with --until-known


def add_until_known(parser: argparse.ArgumentParser, *, heat: str, rival: str, span: str,
                    repeats_note: str = "") -> None:
    """The options, worded for the race (a heat, an engine) or a sweep (a user count, a
    configuration); check_caps checks the parsed values."""
    parser.add_argument("--until-known", action="store_true",
                        help=f"run a {heat} again until a 95%% t-interval on its leader's lead "
                             f"(output tok/s) over each other {rival} excludes 0 (2 runs each at "
                             "least), or a cap is reached")
    parser.add_argument("--max-repeats", type=positive_int, default=None, metavar="N",
                        help=f"with --until-known: runs of one {heat} by one {rival} at most"
                             f"{repeats_note} (default {DEFAULT_MAX_REPEATS})")
    parser.add_argument("--max-time", type=duration, default=None, metavar="S",
                        help=f"with --until-known: start no repeat after S seconds of {span} (600, 15m)")
    parser.add_argument("--resolve-pct", type=percent, default=None, metavar="X",
                        help="with --until-known: say how many runs would resolve a difference of "
                             "X%% (default: the difference observed)")


def check_caps(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """One `error:` line (exit 2) for a cap given without --until-known."""
    given = [name for name in CAPS if getattr(args, name[2:].replace("-", "_")) is not None]
    if given and not args.until_known:
        parser.error(f"{given[0]} goes with --until-known: add it")
