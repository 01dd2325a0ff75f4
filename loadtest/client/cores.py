"""Each client process on a core of its own: the master lays the client out, and every worker
that `--processes` forked pins itself to one of the master's cores.

The master (or the one process) pins itself first (loadtest/local_engine.py pin_client_beside:
beside an engine the rig started, the cores that engine leaves, with the missing ones taken
from it for several processes) and refuses a client with fewer cores than processes
(`lay_out_client`); it hands its cores on to the workers with the options (`client_cores`,
`client_master_pid`). Each worker then pins itself to the core at its place among the
processes its parent forked (`pin_forked_worker`); a worker forked by another host's
`--worker --processes N` does the same on the cores that command was given.
"""

from __future__ import annotations

import os
from typing import Any

import psutil

from loadtest.client.options import ConfigError
from loadtest.cpus import allowed_cpus, check_client_cores, cpu_set, format_cpus, pin_process
from loadtest.local_engine import engine_cores_at, pin_client_beside

__all__ = ["lay_out_client", "pin_forked_worker"]


def lay_out_client(options: Any, url: str, behind: tuple[str, ...]) -> None:
    """The master's (or the one process's) pinning, said in the options the row reads
    (`client_pinned_by`, `engine_cpus`) and handed to the workers (`client_cores`,
    `client_master_pid`); ConfigError when the client cannot have a core a process."""
    processes = int(getattr(options, "processes", None) or 1)
    try:
        options.client_pinned_by = pin_client_beside(
            url, bool(getattr(options, "no_pin", False)), behind, processes=processes)
        check_client_cores(allowed_cpus(), processes,
                           f"the client's cores {format_cpus(allowed_cpus())}")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    options.engine_cpus = engine_cores_at(url, behind)
    options.client_cores = format_cpus(allowed_cpus())
    options.client_master_pid = os.getpid()


def pin_forked_worker(options: Any) -> int | None:
    """Pin this worker, when its parent forked it (`--processes`), to the core at its place
    among its forked siblings: one of its master's cores, or where another host's `--worker`
    forked it, one of that command's. The core, or None where it is not such a worker or there
    are fewer cores than siblings (the master refused that already)."""
    me = psutil.Process()
    parent = me.parent()
    try:
        if parent is None or parent.cmdline() != me.cmdline():
            return None
        siblings = sorted(child.pid for child in parent.children()
                          if _same_command(child, me))
    except psutil.Error:
        return None
    from_master = parent.pid == getattr(options, "client_master_pid", None)
    cores = sorted(cpu_set(options.client_cores) if from_master else allowed_cpus())
    if me.pid not in siblings or len(siblings) > len(cores):
        return None
    core = cores[siblings.index(me.pid)]
    pin_process(0, {core})
    return core


def _same_command(process: psutil.Process, me: psutil.Process) -> bool:
    try:
        return process.cmdline() == me.cmdline()
    except psutil.Error:
        return False
