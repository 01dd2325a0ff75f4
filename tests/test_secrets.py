"""Secrets planted in every place a user may put one never appear in anything a run leaves:
results, request records, run metadata, logs, the report."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from loadtest.launch.command import locust_command
from rig_helpers import REPO, running_pacer

_KEY = "sk-MARKERkey0123456789"  # the engine API key, from the environment
_FLAG_KEY = "sk-MARKERflag0123456789"  # a key among the recorded engine flags
_HF = "hf_MARKERtoken0123456789"  # a Hugging Face token in the environment
_TAG_KEY = "sk-MARKERtag0123456789"  # a key in the run's free label (--tag), issue 37


def test_planted_secrets_are_in_no_file_the_run_and_report_write(tmp_path: Path):
    out = tmp_path / "results"
    env = {**os.environ, "LLM_API_KEY": _KEY, "HF_TOKEN": _HF}
    with running_pacer("--ttft-ms", "5", "--gap-ms", "5") as url:
        run = subprocess.run(
            locust_command(host=url, users=2, rig_options=[
                "--only-summary", "--engine", "vllm", "--model", "pacer", "--requests", "8",
                "--max-tokens", "8", "--out", str(out),
                f"--flags=--max-num-seqs 4 --api-key {_FLAG_KEY}", f"--tag=token={_TAG_KEY}"]),
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    report = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "loadtest.report", str(out)],
                            cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode in (0, 1) and report.returncode == 0, run.stderr[-2000:] + report.stderr
    written = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "runs.csv" for p in written) and any(p.suffix == ".html" for p in written)
    texts = {str(p): p.read_bytes().decode(errors="replace") for p in written}
    texts |= {"locust output": run.stdout + run.stderr,
              "report output": report.stdout + report.stderr}
    for secret in (_KEY, _FLAG_KEY, _HF, _TAG_KEY):
        assert not [where for where, text in texts.items() if secret in text], secret
    assert "--api-key ***" in (out / "runs.csv").read_text()  # the flag kept, its value not
    assert "token=***" in (out / "runs.csv").read_text()  # the tag too, redacted as flags are
