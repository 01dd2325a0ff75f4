"""`rig`: the one front door to everything a user does with the rig.

    rig run --engine vllm-cpu --users 32 --requests 256      # one workload (the locustfile)
    rig race                                                  # the demo's race of local engines
    rig sweep threads vllm-cpu --users 1,4,16,64              # sweeps: threads, flags, rates
    rig report results/                                       # tables and plots
    rig export results/ --out export/                         # Parquet + DuckDB, to query
    rig engine start --engine vllm-cpu                        # local engines: start, stop, list

Each command is the module that already does the work, called with the rest of the command
line (nothing is parsed twice here); `rig COMMAND --help` is that module's own help. Exit codes
are the module's: 0 done, 1 done with failures (recorded), 2 bad input (one `error:` line).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

from loadtest.toolkit.args import fail, invoked_as

__all__ = ["COMMANDS", "Command", "main"]


@dataclass(frozen=True)
class Command:
    words: tuple[str, ...]  # what the user types after `rig`: ("sweep", "threads")
    summary: str  # one line for `rig --help`
    module: str  # the module that does the work
    parser: str | None = "parser"  # its function building its RigParser (None: it parses itself)
    check: str = ""  # "module:function" parsing AND checking argv with no side effect, where the
    #                  module checks more than its parser does (default: the parser's parse_args)

    @property
    def name(self) -> str:
        return " ".join(self.words)

    def _import(self, module: str) -> ModuleType:
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and module.startswith(exc.name):  # the command itself, not what it needs
                fail(f"rig {self.name}: {module} is not in this checkout")
            raise

    def build_parser(self) -> argparse.ArgumentParser | None:
        """The command's parser, for tests and help; None for a command that parses itself."""
        if self.parser is None:
            return None
        token = invoked_as.set(f"rig {self.name}")
        try:
            return getattr(self._import(self.module), self.parser)()
        finally:
            invoked_as.reset(token)

    def check_argv(self, argv: Sequence[str]) -> object:
        """Parse and check `argv` as the command will, starting nothing: its namespace, or
        SystemExit (2 and one `error:` line on bad input, 0 after --help)."""
        token = invoked_as.set(f"rig {self.name}")
        try:
            if self.check:
                module, _, function = self.check.partition(":")
                return getattr(self._import(module), function)(list(argv))
            parser = self.build_parser()
            if parser is None:
                raise TypeError(f"rig {self.name} parses its own arguments")
            return parser.parse_args(list(argv))
        finally:
            invoked_as.reset(token)

    def run(self, argv: list[str]) -> int:
        entry: Callable[[list[str]], int] = self._import(self.module).main
        token = invoked_as.set(f"rig {self.name}")
        try:
            return int(entry(argv) or 0)
        finally:
            invoked_as.reset(token)


COMMANDS: tuple[Command, ...] = (
    Command(("run",), "one fixed workload against one engine (the locustfile)", "loadtest.cli.run",
            check="loadtest.cli.run:checked_args"),
    Command(("k8s",), "a distributed run as Kubernetes objects (master and worker Jobs)",
            "loadtest.cli.k8s", check="loadtest.cli.k8s:checked_args"),
    Command(("race",), "the demo's race: local engines, every user count, one table",
            "loadtest.race", check="loadtest.race.args:parse_args"),
    Command(("sweep", "threads"), "how many users saturate an engine", "loadtest.sweep.threads"),
    Command(("sweep", "flags"), "each engine configuration of a YAML matrix, measured",
            "loadtest.sweep.flags", check="loadtest.sweep.flags:parse_args"),
    Command(("sweep", "matrix"), "the same as `rig sweep flags` (a YAML matrix)",
            "loadtest.sweep.flags", check="loadtest.sweep.flags:parse_args"),
    Command(("sweep", "rates"), "at what request rate an engine saturates (open loop)",
            "loadtest.sweep.rates"),
    Command(("sweep", "slo"), "the highest request rate each engine serves within an SLO",
            "loadtest.sweep.slo", check="loadtest.sweep.slo:parse_args"),
    Command(("report",), "tables and plots from a results folder", "loadtest.report.cli"),
    Command(("export",), "results folders to Parquet and one DuckDB file, to query",
            "loadtest.export.cli"),
    Command(("calibrate",), "how much streamed load this client measures faithfully",
            "loadtest.calibration.calibrate"),
    Command(("bench",), "the rig's client beside a lean reference client, same engine",
            "loadtest.bench.client"),
    Command(("latency",),
            "the studies' latency preset of the race: one user, servers and in-process",
            "loadtest.race.latency", check="loadtest.race.latency:checked_args"),
    Command(("latency-table",), "the studies' latency table from a results folder",
            "loadtest.inprocess.latency"),
    Command(("inprocess",), "the fixed workload through an engine library, in-process",
            "loadtest.inprocess.cli", check="loadtest.inprocess.cli:checked_args"),
    Command(("overhead",), "a server's overhead per request: server vs in-process",
            "loadtest.inprocess.overhead"),
    Command(("engine",), "local engines: start | stop | list", "loadtest.local_engine"),
    Command(("check-env",), "check engine settings in a .env file", "servers.check"),
    Command(("cpus",), "the engine/client core layout this machine gets", "loadtest.cpus"),
    Command(("reconcile",), "a run recomputed under each peer tool's definitions, differences explained",
            "loadtest.reconcile.cli"),
    Command(("peers", "run"), "a peer tool (vllm bench serve, aiperf, guidellm) beside the rig, same workload",
            "loadtest.reconcile.side_by_side"),
)


def _usage(commands: Sequence[Command], prefix: str = "") -> str:
    width = max(len(c.name) for c in commands)
    lines = [f"  rig {c.name:<{width}}  {c.summary}" for c in commands]
    return (f"usage: rig {prefix}COMMAND [ARGS] (rig {prefix}COMMAND --help: its options)\n\n"
            f"commands:\n" + "\n".join(lines) + "\n\nexamples:\n" + __doc__.split("\n\n")[1] + "\n")


def find(argv: Sequence[str]) -> tuple[Command, list[str]]:
    """The command `argv` names and the arguments left for it; exits 2 (one line) when none."""
    matches = [c for c in COMMANDS if tuple(argv[:len(c.words)]) == c.words]
    if matches:
        command = max(matches, key=lambda c: len(c.words))
        return command, list(argv[len(command.words):])
    group = [c for c in COMMANDS if argv and len(c.words) > 1 and c.words[0] == argv[0]]
    if group and len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(_usage(group, f"{argv[0]} "), end="")
        sys.exit(0)
    if group:
        fail(f"rig {argv[0]} takes one of: {', '.join(c.words[1] for c in group)} "
             f"(see rig --help)")
    fail(f"unknown command {argv[0]!r}; commands: "
         f"{', '.join(dict.fromkeys(c.words[0] for c in COMMANDS))} (see rig --help)")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        fail("name a command (see rig --help)")
    if argv[0] in ("-h", "--help"):
        print(_usage(COMMANDS), end="")
        return 0
    command, rest = find(argv)
    return command.run(rest)


if __name__ == "__main__":
    sys.exit(main())
