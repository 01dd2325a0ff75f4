"""The argparse base every command of the rig uses.

Bad input must end in ONE `error: ...` line on stderr and exit 2 (nothing sent, nothing written),
whatever the command; argparse's own error prints the whole usage first. `--help` exits 0.
"""

from __future__ import annotations

import argparse
import re
import sys
from contextvars import ContextVar
from typing import NoReturn

__all__ = ["RigParser", "command_prog", "fail", "invoked_as", "refuse_argument"]

invoked_as: ContextVar[str | None] = ContextVar("invoked_as", default=None)
"""The command line a module's parser runs under when `rig` delegates to it ("rig sweep
threads"), so its usage and error hints name the command the user typed."""


def command_prog(default: str) -> str:
    """The prog for a module's top parser: `rig ...` when run through `rig`, else `default`."""
    return invoked_as.get() or default


def fail(message: str) -> NoReturn:
    """One `error:` line (the first line of `message`) and exit 2."""
    print(f"error: {message.splitlines()[0] if message else 'bad input'}", file=sys.stderr)
    sys.exit(2)


def refuse_argument(message: str, prog: str) -> NoReturn:
    """argparse's error `message` as the rig says it, on one `error:` line, and exit 2: the
    error() of every rig parser, and of Locust's when the locustfile hooks it."""
    first = _sentence(message).splitlines()[0] if message.strip() else "bad input"
    fail(f"{first} (see {prog} --help)")


class RigParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose `error()` prints one line and exits 2, and whose help
    keeps the description's and epilog's line breaks (their examples).

    Subparsers made through `add_subparsers()` are RigParsers too (argparse builds them with
    the parent's class), so a subcommand fails in one line as its parent does.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        refuse_argument(message, self.prog)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        # argparse drops a value that is exactly "--" before the option's type sees it, so
        # `--timeout=--` would pass as an empty list (and a start go on with it).
        words = sys.argv[1:] if args is None else list(args)
        for word in words:
            if word == "--":
                break
            if _DASHES_VALUE.fullmatch(word):
                self.error(f"{word.split('=', 1)[0]} needs a value, got '--'")
        return super().parse_known_args(words, namespace)


_DASHES_VALUE = re.compile(r"--?[^-=\s][^=\s]*=--")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """The description's and epilog's line breaks kept; an option a command took from the run
    options' registrar (loadtest/launch/options.py add_run_options, which marks it) says the
    command's own default, when its help does not already name one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        shown = not (default is None or default is False or default == ""
                     or default == argparse.SUPPRESS)
        if getattr(action, "show_default", False) and shown and "default" not in text:
            return f"{text} (default %(default)s)"
        return action.help


def _sentence(message: str) -> str:
    """argparse's "argument --rates: must be ..." as the rig says it: "--rates must be ..."
    (the option types' messages follow the option's name; argparse's own keep their colon)."""
    match = re.fullmatch(r"argument (\S+?): (.*)", message, flags=re.DOTALL)
    if not match:
        return message
    names, rest = match.groups()
    name = names.split("/")[-1]  # "-u/--users": the long name
    if rest.startswith(name):  # a message that names its option itself
        return rest
    return f"{name} {rest}" if rest.startswith(("must ", "names ", "is ")) else f"{name}: {rest}"
