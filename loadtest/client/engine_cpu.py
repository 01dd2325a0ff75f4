"""How much CPU each process of an engine's process tree used over a run, in % of one core.

An engine can be held back by one process on the host (vLLM's single API server at a full core
while its GPUs wait) with no sign in the GPUs' utilization. Linux counts, per thread, the
nanoseconds spent on a CPU: the first field of /proc/PID/task/TID/schedstat. At the run's start
and stop this reads every process of the engine's tree (its leader and every descendant,
runqueue.py's ``process_tree``), with its name; over the run each process's CPU is the summed
growth of its threads over the wall time, so 100% is one core busy all the time (a process
with several busy threads passes it).

A process (or thread) born during the run counts from zero; one that ended before the run's
stop takes its time with it (it is not in the stop's reading: an undercount, never a negative).
Without /proc or schedstat (not Linux, a kernel without it) the columns are empty and the list
is absent, never an error.

A process's name is what /proc/PID/comm says, except where the process renamed itself
(setproctitle, as vLLM's ``VLLM::EngineCore`` and ``VLLM::Worker`` do): comm then holds only
the title's first 15 characters, and the command line the whole title. An interpreter running
a module (``python -m vllm.entrypoints.openai.api_server``, vLLM's one API server, which keeps
its name) is named with its module.

An engine's front ends (its API-server processes, named by its recipe's ``front_ends``) get a
column of their own: the busiest one's share. A Python API server near a full core is a ceiling
the GPUs' utilization does not show, and the busiest process overall cannot show it where GPU
workers spin-wait at a full core (vLLM's tensor-parallel workers and engine core show one at every
load, the lightest included).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.client.runqueue import growth_ns, process_tree, thread_schedstat_ns

__all__ = ["COLUMNS", "LISTED_MIN_PCT", "EngineProcessCpu", "front_end_share", "process_name",
           "tree_cpu_ns"]

_PROC = Path("/proc")
_COMM_LEN = 15  # the kernel keeps a task's name to 15 bytes (TASK_COMM_LEN, less its NUL)
_ON_CPU = 0  # schedstat's first field: time on a CPU (ns)
LISTED_MIN_PCT = 1.0  # run.json's list leaves out processes below this share of a core
COLUMNS = ("engine_process_cpu_max_pct", "engine_process_cpu_max_name", "engine_front_end_cpu_max_pct")


@dataclass(frozen=True)
class _Process:
    name: str
    threads_ns: dict[str, int]  # each thread's time on a CPU so far, by thread id


def process_name(proc: Path) -> str:
    """The process's name (see the module's docstring); "?" when it ended meanwhile."""
    try:
        comm = (proc / "comm").read_text().strip()
    except OSError:
        return "?"
    try:
        argv = (proc / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    except OSError:
        argv = []
    words = [word.decode(errors="replace") for word in argv]
    if words and len(comm) == _COMM_LEN and words[0].startswith(comm):
        return words[0]  # renamed: comm is the title's first 15 characters
    if "-m" in words[1:-1]:
        return f"{comm} -m {words[words.index('-m', 1) + 1]}"
    return comm


def tree_cpu_ns(pid: int, root: Path = _PROC) -> dict[int, _Process] | None:
    """Each process of ``pid``'s tree now, by pid: its name and its threads' time on a CPU;
    None when the tree is gone or /proc cannot say."""
    tree: dict[int, _Process] = {}
    for member in process_tree(pid, root):
        threads = thread_schedstat_ns(root / str(member), _ON_CPU)
        if threads is None:
            if member == pid:
                return None  # the leader has no schedstat: nothing here can be trusted
            continue  # a child that ended since the tree was walked
        tree[member] = _Process(process_name(root / str(member)), threads)
    return tree or None


def _shares(start: Mapping[int, _Process], end: Mapping[int, _Process],
            wall_s: float) -> list[dict[str, Any]]:
    """Each process alive at the stop: name, pid, its CPU over the run in % of one core."""
    out = []
    for pid, now in end.items():
        before = start.get(pid)
        used = growth_ns(before.threads_ns if before else {}, now.threads_ns)
        out.append({"name": now.name, "pid": pid,
                    "cpu_pct": round(100.0 * used / 1e9 / wall_s, 1)})
    return out


def front_end_share(processes: list[dict[str, Any]], front_ends: tuple[str, ...]) -> float | None:
    """The busiest front-end process's share of a core: the processes whose name holds one of
    ``front_ends``; None where the engine names none or none was found."""
    shares = [p["cpu_pct"] for p in processes if any(part in p["name"] for part in front_ends)]
    return max(shares) if shares else None


class EngineProcessCpu:
    """Each process's CPU over the engines' trees between start() and stop(). ``leaders``: each
    engine's first process by its URL; with several (replicas behind a balancer) each listed
    process says its replica's URL. ``front_ends``: the engine's API-server processes by name
    (its recipe's)."""

    def __init__(self, leaders: Mapping[str, int], root: Path = _PROC,
                 front_ends: tuple[str, ...] = ()) -> None:
        self._leaders, self._root, self._front_ends = dict(leaders), root, front_ends
        self._start: dict[str, dict[int, _Process] | None] = {}
        self._start_wall = 0.0

    def start(self) -> None:
        self._start = {url: tree_cpu_ns(pid, self._root) for url, pid in self._leaders.items()}
        self._start_wall = time.monotonic()

    def stop(self) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
        """The row's columns (the busiest process: its share and name; the busiest front end's
        share), and run.json's list of every process at or above LISTED_MIN_PCT, busiest first;
        (empty columns, None) where some engine's tree could not be read at the start or the
        stop."""
        wall_s = time.monotonic() - self._start_wall
        processes: list[dict[str, Any]] = []
        for url, pid in self._leaders.items():
            start, end = self._start.get(url), tree_cpu_ns(pid, self._root)
            if start is None or end is None or wall_s <= 0:
                return dict.fromkeys(COLUMNS), None
            replica = {"replica": url} if len(self._leaders) > 1 else {}
            processes += [{**p, **replica} for p in _shares(start, end, wall_s)]
        processes.sort(key=lambda p: -p["cpu_pct"])
        busiest = processes[0] if processes else {}
        return ({"engine_process_cpu_max_pct": busiest.get("cpu_pct"),
                 "engine_process_cpu_max_name": busiest.get("name"),
                 "engine_front_end_cpu_max_pct": front_end_share(processes, self._front_ends)},
                [p for p in processes if p["cpu_pct"] >= LISTED_MIN_PCT])
