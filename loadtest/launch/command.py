"""The one place the Locust command line for a rig run is assembled.

Calibration, sweeps, the rate sweep, the overhead and latency presets, the client bench, the race
and the tests all start the locustfile the same way, so a change to how it is started (the
interpreter, pinning, headless mode) is made here once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any
from pathlib import Path

from loadtest.launch.processes import free_port
from loadtest.toolkit.repo import REPO

__all__ = ["LOCUSTFILE", "default_python", "locust_command", "own_master_port", "worker_command"]

LOCUSTFILE = REPO / "loadtest" / "engines.py"


def default_python() -> str:
    """The rig's own interpreter (`.venv/bin/python`, where `scripts/install.sh` installs Locust)
    when it exists, else the running one."""
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def locust_command(*, host: str, users: int, rig_options: Sequence[str] = (),
                   processes: int | None = None, headless: bool = True, cpus: str | None = None,
                   python: str | None = None, spawn_rate: float | None = None,
                   locust: Sequence[str] | None = None, locustfile: Path = LOCUSTFILE) -> list[str]:
    """`[taskset -c CPUS] PY -m locust -f loadtest/engines.py [--headless] --host H --users N
    [--spawn-rate R] [--processes P] ...rig_options`.

    `rig_options` are the locustfile's own options (`--engine`, `--requests`, ...), passed as
    given; an empty `host` leaves `--host` out (the locustfile then uses the engine's default
    URL); `cpus` pins the client (and every worker Locust forks) to a Linux CPU list; `locust`,
    a command that runs Locust, replaces `PY -m locust` (calibration's $LOCUST); `locustfile`
    another checkout's (the client bench's baseline).
    """
    cmd = ["taskset", "-c", cpus] if cpus else []
    cmd += [*(locust or [python or default_python(), "-m", "locust"]), "-f", str(locustfile)]
    if headless:
        cmd.append("--headless")
    if host:  # "": the locustfile picks the engine's default URL
        cmd += ["--host", host]
    cmd += ["--users", str(users)]
    if spawn_rate is not None:
        cmd += ["--spawn-rate", f"{spawn_rate:g}"]
    if processes is not None:
        cmd += ["--processes", str(processes)]
    cmd += list(rig_options)
    return cmd


def worker_command(master_host: str, *, processes: int = 1, cpus: str | None = None,
                   python: str | None = None, locust: Sequence[str] | None = None) -> list[str]:
    """`[taskset -c CPUS] PY -m locust -f loadtest/engines.py --worker --master-host H
    [--processes P]`: a worker takes every other option from its master."""
    cmd = ["taskset", "-c", cpus] if cpus else []
    cmd += [*(locust or [python or default_python(), "-m", "locust"]), "-f", str(LOCUSTFILE),
            "--worker", "--master-host", master_host]
    return cmd + (["--processes", str(processes)] if processes > 1 else [])


def own_master_port(parser: Any, argv: Sequence[str] = tuple(sys.argv),
                    environ: Mapping[str, str] = os.environ) -> None:
    """With --processes (and not --worker) the master and the workers it forks meet on a free port
    of their own instead of Locust's default 5557, where two such runs on one host would take each
    other's workers or hang. A port given (--master-bind-port, its variable) is kept: defaults
    only. A --worker keeps 5557, its master's on another host."""
    forks = any(a == "--processes" or a.startswith("--processes=") for a in argv) \
        or "LOCUST_PROCESSES" in environ
    if forks and "--worker" not in argv and "LOCUST_MODE_WORKER" not in environ:
        port = free_port()
        parser.set_defaults(master_bind_port=port, master_port=port)
