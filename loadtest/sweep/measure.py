"""One measured run (or warm-up) of a sweep: the rig's own Locust CLI in a fresh process.

The run appends its row to OUT/runs.csv itself; this module builds the command, runs it with a
time limit (stopping it, and only it, on timeout or interrupt), keeps its output in the cell's
locust.log, and finds the row it added.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from loadtest.cli.locust import locust_command
from loadtest.cli.processes import stop_process_group
from loadtest.results.files import read_runs

from loadtest.sweep.matrix import WorkloadOptions
from loadtest.workload.options import option_args

__all__ = ["Outcome", "cell_command", "find_row", "run_locust"]

_STOP_GRACE_S = 15


@dataclass(frozen=True)
class Outcome:
    exit_code: int  # Locust's: 0 ok, 1 some requests failed (recorded), 2 rig could not run; -1 timed out
    error: str  # the last "error: ..." line, or why it timed out
    run_dir: str  # from the run's summary line, when it printed one


def cell_command(*, engine: str, url: str, users: int, workload: WorkloadOptions, out: Path,
                 repeat: int, tag: str, flags: str, gpu: str, warmup_requests: int = 0) -> list[str]:
    """The Locust command of one cell (or, with `warmup_requests`, of the warm-up run)."""
    requests = warmup_requests or workload.requests_at(users)
    rig = ["--only-summary", "--engine", engine, "--requests", str(requests),
           "--max-tokens", str(workload.max_tokens), "--prompts", workload.prompts,
           "--temperature", str(workload.temperature), "--out", str(out), "--repeat", str(repeat),
           "--tag", tag, f"--flags={flags}", f"--gpu={gpu}"]  # "=": a value may start with "--"
    if workload.ignore_eos:
        rig.append("--ignore-eos")
    if workload.api:
        rig += ["--api", workload.api]
    rig += option_args({("workload" if k == "source" else k): v for k, v in workload.source})
    if warmup_requests:
        rig.append("--warmup")
    else:
        if workload.slo:
            rig += ["--slo", workload.slo]  # sweeps keep the answers, so configurations can be compared for equal output
        rig.append("--keep-outputs")  # (loadtest/results/equivalence.py, the report's section)
    return locust_command(host=url, users=users, rig_options=rig, python=sys.executable)


def run_locust(cmd: list[str], log_path: Path, timeout_s: float) -> Outcome:
    """Run ``cmd`` in its own process group, output to ``log_path``; stop it on timeout/interrupt."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w", encoding="utf-8") as log:
        log.write("+ " + " ".join(cmd) + "\n")
        log.flush()
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True, env=_environ())
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop(process)
            return Outcome(-1, f"timed out after {timeout_s:.0f} s (Locust stopped)", "")
        except BaseException:
            _stop(process)
            raise
    text = log_path.read_text(encoding="utf-8", errors="replace")
    errors = re.findall(r"^(?:\S+: )?error: (.+)$", text, re.MULTILINE)
    run_dirs = re.findall(r"\| results (\S+)\s*$", text, re.MULTILINE)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    error = errors[-1] if errors else (lines[-1] if code not in (0, 1) and lines else "")
    return Outcome(code, error, run_dirs[-1] if run_dirs else "")


def find_row(runs_csv: Path, before: set[str], tag: str, users: int, repeat: int) -> dict[str, str] | None:
    """The row this cell's run added to runs.csv (new run_id, same tag, users and repeat)."""
    for row in reversed(read_runs(runs_csv)):
        if (row.get("run_id") not in before and row.get("tag") == tag
                and row.get("users") == str(users) and row.get("repeat") == str(repeat)):
            return row
    return None


def _environ() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(name, None)  # loopback traffic must never be rerouted
    return env


def _stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM the run's process group (it saves a partial run), SIGKILL after a grace period."""
    stop_process_group(process, grace_s=_STOP_GRACE_S)