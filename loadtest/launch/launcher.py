"""The one way a measured run is launched: `run(spec)` starts the locustfile under Locust in a
fresh process of its own group, waits for it (with a deadline when given), stops it and
everything it forked on any way out (timeout, Ctrl-C, SIGTERM turned into an interrupt), and
finds the row the run added to runs.csv by its run id.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from loadtest.launch.processes import stop_process_group
from loadtest.launch.spec import RunSpec, command
from loadtest.results.files import read_runs

__all__ = ["Launched", "find_row", "run", "run_ids"]

_STOP_GRACE_S = 15


@dataclass(frozen=True)
class Launched:
    exit_code: int  # Locust's: 0 ok, 1 some requests failed (recorded), 2 rig could not run; -1 timed out
    error: str  # the last "error: ..." line, or why it timed out (from the log, when there is one)
    run_dir: str  # from the run's summary line, when its output went to a log
    row: dict[str, str] | None  # the row the run added to runs.csv


def run(spec: RunSpec, log_path: Path | None = None, timeout_s: float | None = None, *,
        append: bool = False) -> Launched:
    """Run `spec`, its output to `log_path` (headed by the command; after what it holds with
    `append`) or, without one, to this process's stdout and stderr; stop it on timeout or
    interrupt."""
    cmd, runs_csv = command(spec), spec.runs_csv
    before = run_ids(runs_csv)
    if log_path is None:
        code = _wait(cmd, spec, timeout_s, stdout=None)
        return Launched(code, _timed_out(timeout_s) if code == -1 else "", "",
                        find_row(runs_csv, before))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a" if append else "w", encoding="utf-8") as log:
        start = log.tell()
        log.write("+ " + " ".join(cmd) + "\n")
        log.flush()
        code = _wait(cmd, spec, timeout_s, stdout=log)
    if code == -1:
        return Launched(-1, _timed_out(timeout_s), "", None)
    with log_path.open(encoding="utf-8", errors="replace") as log:
        log.seek(start)
        error, run_dir = _read_output(log.read(), code)  # this run's output only
    return Launched(code, error, run_dir, find_row(runs_csv, before, Path(run_dir).name))


def run_ids(runs_csv: Path) -> set[str]:
    """The run ids in runs_csv now (none when it does not exist yet)."""
    return {row.get("run_id", "") for row in read_runs(runs_csv)}


def find_row(runs_csv: Path, before: set[str], run_id: str = "") -> dict[str, str] | None:
    """The row a run added to runs.csv: the one with `run_id` (its folder's name, from its
    summary line) or, when that was not seen, the newest whose run id is not in `before`."""
    for row in reversed(read_runs(runs_csv)):
        if row.get("run_id") not in before and (not run_id or row.get("run_id") == run_id):
            return row
    return None


def _read_output(text: str, code: int) -> tuple[str, str]:
    """The run's last `error:` line (or, when it could not run, its last line) and the folder
    its summary line names."""
    errors = re.findall(r"^(?:\S+: )?error: (.+)$", text, re.MULTILINE)
    run_dirs = re.findall(r"\| results (\S+)\s*$", text, re.MULTILINE)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    error = errors[-1] if errors else (lines[-1] if code not in (0, 1) and lines else "")
    return error, run_dirs[-1] if run_dirs else ""


def _wait(cmd: list[str], spec: RunSpec, timeout_s: float | None, stdout: IO[str] | None) -> int:
    """Run `cmd` in its own process group; its exit code, or -1 when `timeout_s` passed."""
    process = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.STDOUT if stdout else None,
                               start_new_session=True, cwd=spec.cwd,
                               env={**_environ(), **dict(spec.environ)})
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop(process)
        return -1
    except BaseException:
        _stop(process)
        raise


def _timed_out(timeout_s: float | None) -> str:
    return f"timed out after {timeout_s:.0f} s (Locust stopped)"


def _environ() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(name, None)  # loopback traffic must never be rerouted
    return env


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the run's process group (it saves a partial run), SIGKILL after a grace period."""
    stop_process_group(process, grace_s=_STOP_GRACE_S)
