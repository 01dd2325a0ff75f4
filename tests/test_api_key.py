"""An engine that takes an API key (`--api-key`): the rig sends the key from LLM_API_KEY, and
without it the run is refused before anything is sent. llama.cpp's server, which takes the
same flag and answers /v1/models 401 without the key as vLLM does, starts in a second where
vLLM takes a minute; the key is the rig's Authorization header, the same for every engine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from loadtest.launch.command import locust_command
from loadtest.local_engine import LocalEngine
from rig_helpers import REPO, free_port
from servers.local import LOCAL

_KEY = "sk-rig-test-0123456789"


@pytest.mark.engine
def test_the_key_is_sent_and_its_absence_refused(tmp_path: Path):
    why = LOCAL["llamacpp-cpu"].missing()
    if why:
        pytest.skip(why)
    with LocalEngine(port=free_port(), engine="llamacpp-cpu", extra_args=["--api-key", _KEY],
                     log_path=tmp_path / "engine.log") as engine:
        def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                locust_command(host=engine.url, users=2, rig_options=[
                    "--only-summary", "--engine", "llamacpp-cpu", "--requests", "4",
                    "--max-tokens", "8", "--out", str(tmp_path / "results")]),
                cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
        without = {k: v for k, v in os.environ.items() if k != "LLM_API_KEY"}
        refused = run(without)
        sent = run({**without, "LLM_API_KEY": _KEY})
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert [line for line in refused.stderr.splitlines() if line.startswith("error: ")]
    assert "401" in refused.stderr
    assert sent.returncode == 0, sent.stderr[-2000:]
    assert _KEY not in (tmp_path / "results" / "runs.csv").read_text()
