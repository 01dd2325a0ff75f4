"""How long this process was runnable but not running: the scheduler's run-queue wait.

A client starved of CPU by an engine on the same cores reads its streams late, so answers seem
to arrive whole. Linux counts, per thread, the nanoseconds spent waiting on a run queue: the
second field of /proc/PID/task/TID/schedstat (on CPU ns, waiting ns, timeslices). The wait over
a run is the sum over the process's threads of each one's growth from the run's start; a thread
that ended during the run takes its wait with it (an undercount, never a negative). Without
/proc or schedstat (not Linux, a kernel without it) every figure is None.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["RunQueueWait", "thread_waits_ns"]

_SELF = Path("/proc/self")


def thread_waits_ns(proc: Path = _SELF) -> dict[str, int] | None:
    """Each thread's run-queue wait so far (ns), by thread id; None where /proc cannot say."""
    try:
        tasks = list((proc / "task").iterdir())
    except OSError:
        return None
    waits = {}
    for task in tasks:
        try:
            fields = (task / "schedstat").read_text().split()
            waits[task.name] = int(fields[1])
        except FileNotFoundError:
            continue  # the thread ended since the folder was listed
        except (OSError, IndexError, ValueError):
            return None  # no schedstat in this kernel, or one it writes otherwise
    return waits or None


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
        # A thread born during the run counts from zero (max: an id reused by a new thread).
        wait_ns = sum(max(0, now - self._start.get(tid, 0)) for tid, now in end.items())
        wait_ms = wait_ns / 1e6
        pct = 100.0 * wait_ms / 1000 / wall_s if wall_s > 0 else None
        return {"client_runqueue_wait_ms": wait_ms, "client_runqueue_wait_pct": pct}
