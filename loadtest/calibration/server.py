"""The pacing server as a child process: started pinned, asked over HTTP, stopped.

Used by the calibration (calibrate.py) and by the measurer's benchmark (`rig bench --pacer`). It
imports nothing that imports Locust: Locust monkey-patches the process that imports it, and the
benchmark's reference client runs asyncio in this process.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from loadtest.toolkit.repo import REPO
from loadtest.launch.processes import free_port, stop_process_group

__all__ = ["CalibrationError", "Pacer", "pacer_env"]


class CalibrationError(RuntimeError):
    """One line for the user."""


class Pacer:
    def __init__(self, python: str, cores: list[int] | None, workers: int, args: argparse.Namespace,
                 log: Path, host: tuple[list[str], str] | None = None) -> None:
        """`host`: (the command prefix that runs inside a host of its own, its address), for a
        pacer the client reaches over a network; default this host's loopback."""
        prefix, address = host or ([], "127.0.0.1")
        self.port = free_port()
        control = free_port() if workers > 1 else self.port
        self.url = f"http://{address}:{self.port}"
        self.control_url = f"http://{address}:{control}"
        cmd = [*prefix, python, "-m", "loadtest.calibration.pacer", "--host", address,
               "--port", str(self.port), "--ttft-ms", str(args.ttft_ms), "--gap-ms",
               str(args.gap_ms), "--tokens", str(args.tokens), "--workers", str(workers)]
        if workers > 1:
            cmd += ["--control-port", str(control)]
        if cores:
            cmd = ["taskset", "-c", ",".join(map(str, cores)), *cmd]
        self.cmd = cmd
        self._log = log.open("w")
        self.process = subprocess.Popen(cmd, cwd=REPO, env=pacer_env(), stdout=self._log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60  # a busy machine can be slow to start a Python
        while True:
            if self.process.poll() is not None:
                raise CalibrationError(f"the pacer exited at once: {log.read_text().strip()[-300:]}")
            try:
                self.get("/lateness")
                return
            except (OSError, ValueError, CalibrationError):
                if time.monotonic() > deadline:
                    self.stop()
                    said = log.read_text().strip()[-200:] or "nothing"
                    raise CalibrationError(f"the pacer did not answer within 60 s ({shlex.join(cmd)}"
                                           f" printed: {said})")
                time.sleep(0.1)

    def get(self, path: str, method: str = "GET") -> dict[str, Any]:
        request = urllib.request.Request(self.control_url + path, method=method)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=60) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise CalibrationError(f"the pacer answered {path} with HTTP {exc.code}") from None

    def stop(self) -> None:
        stop_process_group(self.process, grace_s=10)
        self._log.close()


def pacer_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return env
