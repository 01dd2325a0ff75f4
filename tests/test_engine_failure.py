"""An engine that dies mid-run: every request is recorded, the run ends, nothing is lost."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from rig_helpers import REPO, free_port
from loadtest.local_engine import LocalEngine


def test_engine_killed_mid_run_leaves_complete_records_and_a_row(tmp_path: Path):
    out = tmp_path / "out"
    with LocalEngine(port=free_port(), log_path=tmp_path / "engine.log") as engine:
        cmd = [str(REPO / ".venv/bin/locust"), "-f", str(REPO / "loadtest/engines.py"),
               "--headless", "--only-summary", "--host", engine.url, "--users", "4",
               "--requests", "40", "--max-tokens", "256", "--ignore-eos", "--out", str(out)]
        locust = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        requests_log = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # kill once a few requests have finished
            logs = list(out.glob("runs/*/requests.jsonl"))
            if logs and len(logs[0].read_text().splitlines()) >= 4:
                requests_log = logs[0]
                break
            time.sleep(0.2)
        assert requests_log is not None, "no request finished before the kill"
        assert engine.process is not None
        os.killpg(engine.process.pid, signal.SIGKILL)  # a crash, not a graceful stop
        _, stderr = locust.communicate(timeout=120)
    assert locust.returncode == 1, stderr[-2000:]  # requests failed; the rig itself did not
    records = [json.loads(line) for line in requests_log.read_text().splitlines()]
    assert sorted(r["request_id"] for r in records) == list(range(40))
    ok = [r for r in records if r["error_kind"] is None]
    failed = [r for r in records if r["error_kind"] is not None]
    assert len(ok) >= 4 and failed
    assert {r["error_kind"] for r in failed} <= {"truncated", "connect"}
    assert all(r["output_tokens"] == 256 for r in ok)
    with (out / "runs.csv").open(newline="") as file:
        [row] = list(csv.DictReader(file))
    assert int(row["completed"]) == len(ok) and int(row["failed"]) == len(failed)
    assert int(row["output_tokens"]) == 256 * len(ok)
