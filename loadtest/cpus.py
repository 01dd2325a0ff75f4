"""Linux CPU lists ("0", "1-15", "0,2-3"), and the rig's default split of a machine between the
engine and the load generator.

On a small machine an engine left free to use every core starves the client that measures it (and
its own API front end): answers arrive whole, the event loop wakes late, and the run describes the
host, not the engine. So by default the client gets the first core it may use and the engine the
rest; measured on 2 cores, that keeps every run valid with the rig level with a lean reference
client (docs/measurement.md, "How good the measurer is").

The layout is applied by default: `python -m loadtest.local_engine start` pins the engine to the
engine's side, and a run against an engine so started moves its client to the rest by itself
(`--no-pin`, add_pin_option, opts out).

A client of N Locust processes (`--processes N`) gets N cores, one a process, never N processes
on one core: the layout gives it N (`complete_layout(..., processes=N)`), a run beside an engine
the rig started takes the missing ones from that engine's share (`take_client_cores`), and
either refuses in one line when the machine cannot give them.

    python3 -m loadtest.cpus [--engine LIST] [--client LIST] [--processes N]
                                                           # prints: ENGINE_CPUS CLIENT_CPUS

prints the layout with what was not given filled in ("-" for "not pinned"), or one error line
and exit 2. Standard library only, so scripts can ask before anything is installed.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

from loadtest.toolkit.args import RigParser, command_prog  # standard library only, as this module

__all__ = ["add_pin_option", "allowed_cpus", "check_client_cores", "checked_cpus",
           "complete_layout", "cpu_model", "cpu_set", "default_layout", "format_cpus",
           "pin_process", "take_client_cores"]


def cpu_set(cpus: str) -> set[int]:
    """The cores of a Linux CPU list ("1", "0,2", "0-3"); ValueError when it is not one."""
    cores: set[int] = set()
    for part in cpus.split(","):
        low, _, high = part.partition("-")
        cores.update(range(int(low), int(high or low) + 1))
    return cores


def format_cpus(cores: set[int] | list[int]) -> str:
    """The shortest Linux CPU list of `cores`: {0, 1, 2, 5} -> "0-2,5"."""
    parts: list[str] = []
    for core in sorted(cores):
        if parts and parts[-1].rpartition("-")[2] == str(core - 1):
            parts[-1] = f"{parts[-1].partition('-')[0]}-{core}"
        else:
            parts.append(str(core))
    return ",".join(parts)


def cpu_model() -> str:
    """This machine's CPU model ("model name" in /proc/cpuinfo; the platform's word elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def allowed_cpus() -> set[int]:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def pin_process(pid: int, cores: set[int]) -> None:
    """Pin every thread of process `pid` (0: this one) to `cores` (sched_setaffinity moves one
    thread only; threads started later inherit their starter's cores). A thread that ends
    meanwhile, or one this user may not move, is left."""
    for thread in os.listdir(f"/proc/{pid or 'self'}/task"):
        try:
            os.sched_setaffinity(int(thread), cores)
        except OSError:
            pass


def default_layout(cores: set[int] | None = None, client_cores: int = 1) -> tuple[str, str]:
    """(engine cores, client cores) as CPU lists: the client alone on the lowest `client_cores`
    cores (one a client process), the engine on the others; ("", "") (nothing pinned) when that
    leaves the engine no core."""
    cores = allowed_cpus() if cores is None else cores
    if len(cores) <= client_cores:
        return "", ""
    client = set(sorted(cores)[:client_cores])
    return format_cpus(cores - client), format_cpus(client)


def complete_layout(engine: str = "", client: str = "", processes: int = 1) -> tuple[str, str]:
    """The layout with what was not given filled in: both empty -> default_layout() with a core
    for each of the client's `processes`; one given -> the other gets the remaining cores.
    ValueError when a list is malformed, names a core this process may not use, the two overlap
    or leave the other side nothing, or the client gets fewer cores than `processes`."""
    cores = allowed_cpus()
    if not engine and not client:
        if processes > 1 and len(cores) <= processes:
            raise ValueError(f"--processes {processes} needs {processes} cores for the client and "
                             f"one for the engine; this machine offers {len(cores)} "
                             f"({format_cpus(cores)}): run fewer processes")
        return default_layout(cores, client_cores=processes)
    given = {name: checked_cpus(text, name, cores)
             for name, text in (("engine", engine), ("client", client)) if text}
    if len(given) == 2:
        if given["engine"] & given["client"]:
            raise ValueError(f"engine cores {engine} and client cores {client} overlap")
        check_client_cores(given["client"], processes, f"client cores {client}")
        return engine, client
    name, chosen = next(iter(given.items()))
    rest = cores - chosen
    if not rest:
        raise ValueError(f"{name} cores {format_cpus(chosen)} leave no core for the "
                         f"{'client' if name == 'engine' else 'engine'}")
    if name == "engine":
        check_client_cores(rest, processes, f"engine cores {engine} leave the client "
                                            f"{format_cpus(rest)}, which")
        return format_cpus(chosen), format_cpus(rest)
    check_client_cores(chosen, processes, f"client cores {client}")
    return format_cpus(rest), format_cpus(chosen)


def check_client_cores(client: set[int], processes: int, what: str) -> None:
    """ValueError, saying `what` gave them, when `client` has fewer cores than `processes`."""
    if len(client) < processes:
        raise ValueError(f"{what} {'is' if len(client) == 1 else 'are'} {len(client)} "
                         f"core{'' if len(client) == 1 else 's'} for --processes {processes}: "
                         "the client needs one core a process")


def take_client_cores(engine: set[int], client: set[int],
                      processes: int) -> tuple[set[int], set[int]]:
    """(engine, client) with the client given a core for each of its `processes`, the missing
    ones taken from the engine's lowest; ValueError when that would leave the engine none."""
    missing = processes - len(client)
    if missing <= 0:
        return engine, client
    taken = set(sorted(engine)[:missing])
    if len(engine) <= missing:
        raise ValueError(f"--processes {processes} needs {processes} cores for the client; the "
                         f"engine's cores {format_cpus(engine)} and the client's "
                         f"{format_cpus(client) or 'none'} cannot give them and leave the engine "
                         "one: run fewer processes")
    return engine - taken, client | taken


def checked_cpus(text: str, name: str, cores: set[int] | None = None) -> set[int]:
    """The cores of CPU list `text`, all of them among `cores` (default: those this process may
    use); ValueError naming `name` otherwise."""
    cores = allowed_cpus() if cores is None else cores
    try:
        chosen = cpu_set(text)
    except ValueError:
        chosen = set()
    if not chosen:  # not a list, or an empty range such as 3-1
        raise ValueError(f"{name} cores must be a CPU list like 1 or 0-3, got {text!r}")
    if not chosen <= cores:
        raise ValueError(f"{name} cores {text!r} name cores this machine does not offer "
                         f"(it has {format_cpus(cores)})")
    return chosen


def add_pin_option(parser: Any) -> None:
    """The client's --no-pin: a run against an engine the rig started on this host otherwise
    moves itself to the cores that engine leaves free (loadtest/local_engine.py)."""
    parser.add_argument("--no-pin", action="store_true", default=False,
                        help="leave the client on every core even beside an engine the rig "
                             "started on this host (default: pin it to the cores the engine "
                             "leaves free; the row's client_pinned_by says which)")


def parser() -> RigParser:
    from loadtest.toolkit.types import positive_int  # it imports this module

    p = RigParser(prog=command_prog("python3 -m loadtest.cpus"),
                  description="The engine/client core layout: prints ENGINE_CPUS CLIENT_CPUS "
                              "('-' for not pinned), what was not given filled in.",
                  epilog="examples:\n  rig cpus --engine 1-15   # prints: 1-15 0\n"
                         "  rig cpus --processes 2   # on 16 cores prints: 2-15 0-1")
    p.add_argument("--engine", default="", help="the engine's cores, e.g. 1-15")
    p.add_argument("--client", default="", help="the client's cores, e.g. 0")
    p.add_argument("--processes", type=positive_int, default=1,
                   help="the client's Locust processes, a core each (default 1)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        engine, client = complete_layout(args.engine, args.client, args.processes)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(engine or "-", client or "-")
    return 0


if __name__ == "__main__":
    sys.exit(main())
