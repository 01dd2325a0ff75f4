"""Ports and process groups: the one `free_port()` and the one way to stop what the rig started.

Engines, Locust (with its workers), the pacer and in-process workers each run in their own
process group (`start_new_session=True`), so stopping one stops everything it forked.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence

__all__ = ["free_port", "group_alive", "stop_process_group", "stop_process_groups"]

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
    wait up to `kill_wait_s` again; all groups at once, so N groups take one grace period."""
    alive = list(processes)
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, kill_wait_s)):
        for process in alive:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid if isinstance(process, subprocess.Popen) else process, sig)
        deadline = time.monotonic() + wait_s
        while (alive := [p for p in alive if group_alive(p)]) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not alive:
            break
    for process in processes:
        if isinstance(process, subprocess.Popen):
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=kill_wait_s)


def stop_process_group(process: Process, grace_s: float = 20.0, kill_wait_s: float = 5.0) -> None:
    """`stop_process_groups` for one group."""
    stop_process_groups([process], grace_s, kill_wait_s)
