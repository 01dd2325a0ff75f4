"""How long this process was runnable but not running: the scheduler's run-queue wait.

A client starved of CPU by an engine on the same cores reads its streams late, so answers seem
to arrive whole. Linux counts, per thread, the nanoseconds spent waiting on a run queue: the
second field of /proc/PID/task/TID/schedstat (on CPU ns, waiting ns, timeslices). The wait over
a run is the sum over the process's threads of each one's growth from the run's start; a thread
that ended during the run takes its wait with it (an undercount, never a negative). Without
/proc or schedstat (not Linux, a kernel without it) every figure is None.

The same count over an engine's process tree (its leader and every descendant, every thread)
says how long the engine waited for a core: a third process on its cores slows it with no sign
on the client's side. Over the run's wall time and the cores the engine may use, 100% means
every one of those cores had an engine thread waiting all the time.
"""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["EngineRunQueueWait", "RunQueueWait", "growth_ns", "process_tree",
           "thread_schedstat_ns", "thread_waits_ns", "tree_waits_ns"]

_SELF = Path("/proc/self")
_PROC = Path("/proc")


def thread_schedstat_ns(proc: Path, field: int) -> dict[str, int] | None:
    """One field of each thread's schedstat so far (ns; 0: on a CPU, 1: waiting on a run
    queue), by thread id; None where /proc cannot say."""
    try:
        tasks = list((proc / "task").iterdir())
    except OSError:
        return None
    found = {}
    for task in tasks:
        try:
            fields = (task / "schedstat").read_text().split()
            found[task.name] = int(fields[field])
        except FileNotFoundError:
            continue  # the thread ended since the folder was listed
        except (OSError, IndexError, ValueError):
            return None  # no schedstat in this kernel, or one it writes otherwise
    return found or None


def thread_waits_ns(proc: Path = _SELF) -> dict[str, int] | None:
    """Each thread's run-queue wait so far (ns), by thread id; None where /proc cannot say."""
    return thread_schedstat_ns(proc, 1)


def _parent(stat: str) -> int:
    """The parent pid in /proc/PID/stat's text (after the name, which may hold ')' or spaces)."""
    return int(stat.rsplit(")", 1)[1].split()[1])


def process_tree(pid: int, root: Path = _PROC) -> list[int]:
    """``pid`` and its descendants now running, the leader first; [] when it has ended."""
    if not (root / str(pid)).is_dir():
        return []
    children: dict[int, list[int]] = {}
    for entry in root.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            children.setdefault(_parent((entry / "stat").read_text()), []).append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue  # ended since listed, or a stat line this parser cannot read
    tree, seen = [pid], {pid}
    for parent in tree:  # grows as it is walked: breadth first
        for child in children.get(parent, []):
            if child not in seen:
                seen.add(child)
                tree.append(child)
    return tree


def tree_waits_ns(pid: int, root: Path = _PROC) -> dict[str, int] | None:
    """Each thread's run-queue wait so far (ns) over ``pid``'s process tree, by thread id
    (unique on the host); None when the tree is gone or /proc cannot say."""
    waits: dict[str, int] = {}
    for member in process_tree(pid, root):
        found = thread_waits_ns(root / str(member))
        if found is None and member == pid:
            return None  # the leader has no schedstat: nothing here can be trusted
        waits.update(found or {})  # a child that ended meanwhile takes its wait with it
    return waits or None


def growth_ns(start: dict[str, int], end: dict[str, int]) -> int:
    """The threads' summed growth from ``start`` to ``end`` (ns, by thread id). A thread born
    since counts from zero (max: an id reused by a new thread); one that ended is not in
    ``end`` and takes its time with it."""
    return sum(max(0, now - start.get(tid, 0)) for tid, now in end.items())


class RunQueueWait:
    """The process's run-queue wait between start() and stop(), and its share of the wall time."""

    def __init__(self, proc: Path = _SELF) -> None:
        self._proc = proc
        self._start: dict[str, int] | None = None

    def start(self) -> None:
        self._start = thread_waits_ns(self._proc)

    def stop(self, wall_s: float) -> dict[str, float | None]:
        end = thread_waits_ns(self._proc)
        if self._start is None or end is None:
            return {"client_runqueue_wait_ms": None, "client_runqueue_wait_pct": None}
        wait_ms = growth_ns(self._start, end) / 1e6
        pct = 100.0 * wait_ms / 1000 / wall_s if wall_s > 0 else None
        return {"client_runqueue_wait_ms": wait_ms, "client_runqueue_wait_pct": pct}


class EngineRunQueueWait:
    """The run-queue wait of an engine's process tree between start() and stop(): in ms, and
    as a share of (wall time x the cores it may use). Empty columns where /proc cannot say."""

    def __init__(self, pid: int, cores: int, root: Path = _PROC) -> None:
        self._pid, self._cores, self._root = pid, max(cores, 1), root
        self._start: dict[str, int] | None = None
        self._start_wall = 0.0

    def start(self) -> None:
        self._start = tree_waits_ns(self._pid, self._root)
        self._start_wall = time.monotonic()

    def stop(self) -> dict[str, float | None]:
        wall_s = time.monotonic() - self._start_wall
        end = tree_waits_ns(self._pid, self._root)
        if self._start is None or end is None or wall_s <= 0:
            return {"engine_runqueue_wait_ms": None, "engine_runqueue_wait_pct": None}
        wait_ms = growth_ns(self._start, end) / 1e6
        pct = 100.0 * wait_ms / 1000 / wall_s / self._cores
        return {"engine_runqueue_wait_ms": wait_ms, "engine_runqueue_wait_pct": pct}
