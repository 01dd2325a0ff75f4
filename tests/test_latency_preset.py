"""`rig latency` (loadtest/race/latency.py; scripts/latency.sh runs it) for real: a local server
(llama.cpp's llama-server) and in-process engines (llama-cpp-python, CTranslate2) in one studies'
table, one user, warm-up excluded; its bad arguments, one error line each; --help exits 0."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rig_helpers import REPO, free_port  # noqa: E402


def latency(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    """`rig latency ARGS` as a user runs it (the console script's module)."""
    return subprocess.run([sys.executable, "-m", "loadtest.cli.main", "latency", *args],
                          capture_output=True, text=True, timeout=timeout_s, cwd=REPO)


def latency_sh(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """scripts/latency.sh, which README and docs cite: `rig latency` underneath."""
    return subprocess.run([str(REPO / "scripts" / "latency.sh"), *args], capture_output=True,
                          text=True, timeout=timeout_s, cwd=REPO)


@pytest.mark.engine
def test_a_table_over_a_server_and_in_process_engines(tmp_path: Path) -> None:
    done = latency("--out", str(tmp_path), "--requests", "3", "--repeats", "2", "--max-tokens",
                   "16", "--port", str(free_port()), "llamacpp-cpu", "llama-cpp-python",
                   "ctranslate2:int8")
    assert done.returncode == 0, done.stderr[-3000:]
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| platform | mode | options | gpu | avg tok/s | avg time (s) | "
                               "avg output tokens | per-request tok/s p10 / p50 / p90")
    rows = {line.split(" | ")[0][2:] + "/" + line.split(" | ")[1]: line.split(" | ")
            for line in table[1:]}
    assert set(rows) == {"llamacpp-cpu/server", "llama-cpp-python/in-process",
                         "ctranslate2/in-process"}
    for cells in rows.values():
        assert float(cells[4].replace(",", "")) > 0 and float(cells[5]) > 0
        assert cells[6] == "16.0"  # exactly --max-tokens, every request
        assert cells[9].startswith("6 (2,")  # 3 requests x 2 repeats, warm-ups left out
    assert "--compute-type int8" in rows["ctranslate2/in-process"][2]
    assert (tmp_path / "latency.md").read_text().startswith("| platform |")
    assert (tmp_path / "latency.png").stat().st_size > 0
    with (tmp_path / "runs.csv").open() as file:
        runs = list(csv.DictReader(file))
    assert len(runs) == 6 and {r["tag"] for r in runs} == {"latency"}
    assert {r["users"] for r in runs} == {"1"}
    # no server left behind
    assert not (tmp_path / ".engine.pid").exists()


@pytest.mark.parametrize("args, message", [
    ([], "name at least one ENGINE"),
    (["--requests", "0", "vllm-cpu"], "--requests must be a positive integer"),
    (["--bogus", "vllm-cpu"], "unknown option --bogus"),
    (["nope"], "unknown in-process engine 'nope'"),
    (["ctranslate2:fp16"], "ctranslate2 has no variant 'fp16'"),
    (["vllm-cpu", "vllm-cpu"], "an ENGINE is named twice"),
    (["--engine-cpus", "99", "vllm-cpu"], "cores this machine does not offer"),
])
def test_bad_arguments_are_one_error_line(args: list[str], message: str) -> None:
    done = latency(*args, timeout_s=60)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ")


@pytest.mark.parametrize("args, message", [
    (["--requests", "0", "vllm-cpu"], "--requests must be a positive integer"),
    (["nope"], "unknown in-process engine 'nope'")])
def test_the_script_refuses_as_rig_latency_does(args: list[str], message: str) -> None:
    done = latency_sh(*args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ")


@pytest.mark.parametrize("run", [latency, latency_sh], ids=["rig", "script"])
def test_help_exits_0(run) -> None:
    done = run("--help", timeout_s=30)
    assert done.returncode == 0 and done.stdout.startswith("usage: rig latency")
    assert "--max-tokens" in done.stdout and "(default 200)" in done.stdout
