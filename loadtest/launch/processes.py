"""Ports and process groups: the one `free_port()` and the one way to stop what the rig started.

Engines, Locust (with its workers), the pacer and in-process workers each run in their own
process group (`start_new_session=True`), so stopping one stops everything it forked (and the
groups of descendants that left it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["escaped_groups", "free_port", "group_alive", "group_members", "stop_process_group",
           "stop_process_groups"]

Process = subprocess.Popen | int  # a Popen we can reap, or the pid of a group leader we did not
#                                   start


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` now (the OS's pick; another process may take it before use)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def group_alive(process: Process) -> bool:
    """Whether any process of the group `process` leads is alive. A Popen leader is reaped first:
    a zombie leader would keep its group "alive" to killpg."""
    if isinstance(process, subprocess.Popen):
        process.poll()
    pid = process.pid if isinstance(process, subprocess.Popen) else process
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_process_groups(processes: Sequence[Process], grace_s: float = 20.0,
                        kill_wait_s: float = 5.0) -> None:
    """SIGTERM every group, wait until they are gone or `grace_s` passes, SIGKILL what is left and
    wait up to `kill_wait_s` again; all groups at once, so N groups take one grace period.

    A descendant that left its group (setsid or setpgrp, as vLLM's data-parallel API servers do)
    is stopped with it: its own group joins the ones stopped. An interrupt (a second Ctrl-C, a
    SIGTERM turned into one) during the grace period SIGKILLs what is left before it goes on up,
    so a stop cut short never leaves an engine behind."""
    leaders = [p.pid if isinstance(p, subprocess.Popen) else p for p in processes]
    alive: list[Process] = [*processes, *sorted(escaped_groups(leaders))]
    try:
        _signal_groups(alive, signal.SIGTERM)
        alive = _wait_gone(alive, grace_s)
    except BaseException:
        _signal_groups(alive, signal.SIGKILL)
        raise
    if alive:
        _signal_groups(alive, signal.SIGKILL)
        _wait_gone(alive, kill_wait_s)
    for process in processes:
        if isinstance(process, subprocess.Popen):
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=kill_wait_s)


def escaped_groups(pgids: Sequence[int]) -> set[int]:
    """The process groups, other than `pgids` and this process's own, of every descendant of a
    member of `pgids` (read from /proc; empty where there is none)."""
    parent, group = _process_table()
    return _descendant_groups(parent, group, pgids) - {*pgids, os.getpgrp()}


def group_members(pgid: int) -> set[int]:
    """Every process of the group `pgid` and of the groups its descendants left to (an
    engine's whole tree, as stop_process_group stops it)."""
    parent, group = _process_table()
    groups = _descendant_groups(parent, group, [pgid]) - {os.getpgrp()} | {pgid}
    return {pid for pid, g in group.items() if g in groups}


def _process_table() -> tuple[dict[int, int], dict[int, int]]:
    """Each process's parent and process group, from /proc."""
    parent: dict[int, int] = {}
    group: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # the command name, in parentheses, may hold spaces: the fields after its last ")"
            fields = stat.read_text().rpartition(")")[2].split()
            pid = int(stat.parent.name)
            parent[pid], group[pid] = int(fields[1]), int(fields[2])
        except (OSError, ValueError, IndexError):
            continue
    return parent, group


def _descendant_groups(parent: dict[int, int], group: dict[int, int],
                       pgids: Sequence[int]) -> set[int]:
    """The groups of the members of `pgids` and of all their descendants."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    todo = [pid for pid, pgid in group.items() if pgid in pgids]
    seen: set[int] = set(todo)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return {group[pid] for pid in seen}


def _signal_groups(processes: Sequence[Process], sig: signal.Signals) -> None:
    for process in processes:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid if isinstance(process, subprocess.Popen) else process, sig)


def _wait_gone(processes: Sequence[Process], wait_s: float) -> list[Process]:
    """The groups still alive after waiting up to `wait_s` for them all to end."""
    deadline = time.monotonic() + wait_s
    alive = list(processes)
    while (alive := [p for p in alive if group_alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def stop_process_group(process: Process, grace_s: float = 20.0, kill_wait_s: float = 5.0) -> None:
    """`stop_process_groups` for one group."""
    stop_process_groups([process], grace_s, kill_wait_s)
