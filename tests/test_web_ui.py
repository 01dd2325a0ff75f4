"""Locust's web UI, driven through its HTTP API as the page does: each Start runs the fixed
workload again as a new run with its own row."""

from __future__ import annotations

import csv
import json
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

from loadtest.launch.command import locust_command
from rig_helpers import REPO, free_port, running_pacer, wait_for


def _rows(out: Path) -> list[dict[str, str]]:
    path = out / "runs.csv"
    if not path.exists():
        return []
    with path.open(newline="") as file:
        return list(csv.DictReader(file))


def test_each_start_in_the_web_ui_is_a_new_complete_run(tmp_path: Path):
    out = tmp_path / "results"
    with running_pacer("--ttft-ms", "5", "--gap-ms", "5") as engine_url:
        port = free_port()
        ui = f"http://127.0.0.1:{port}"
        locust = subprocess.Popen(  # the form below sets the users
            locust_command(host=engine_url, users=2, headless=False, rig_options=[
                "--web-host", "127.0.0.1", "--web-port", str(port), "--engine", "vllm",
                "--model", "pacer", "--requests", "8", "--max-tokens", "8",
                "--telemetry-interval", "0", "--out", str(out)]),
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            def up() -> bool:
                try:
                    urllib.request.urlopen(ui + "/", timeout=1).close()
                    return True
                except OSError:
                    return False

            def state() -> str:
                with urllib.request.urlopen(ui + "/stats/requests", timeout=5) as answer:
                    return json.loads(answer.read())["state"]

            wait_for(up, "the web UI up", timeout_s=30)
            form = urllib.parse.urlencode({"user_count": 2, "spawn_rate": 2,
                                           "host": engine_url}).encode()
            for start in (1, 2):
                with urllib.request.urlopen(ui + "/swarm", data=form, timeout=10) as answer:
                    assert json.loads(answer.read())["success"]
                wait_for(lambda: len(_rows(out)) == start, f"Start {start}'s row", timeout_s=30)
                wait_for(lambda: state() == "stopped", "the run stopped", timeout_s=30)
        finally:
            locust.terminate()
            log = locust.communicate(timeout=30)[0]
    rows = _rows(out)
    assert len({r["run_id"] for r in rows}) == 2, log[-2000:]
    assert all(r["completed"] == "8" and r["failed"] == "0" for r in rows)
