"""python -m loadtest.inprocess.overhead for real, on the llama.cpp pair (llama-server vs
llama-cpp-python on a libllama from the same tree): both sides run the same workloads, the
server is stopped afterwards, and the table gives the server's overhead per request. The vLLM
pair runs the same code with another pair of names (its in-process side is tested in
test_inprocess.py). Bad arguments are one error line."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rig_helpers import REPO, free_port  # noqa: E402

sys.path.insert(0, str(REPO))
from loadtest.local_engine import _healthy  # noqa: E402
from test_cli import BY_NAME, check  # noqa: E402 - the commands' checks, in-process


def overhead(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m",
                           "loadtest.inprocess.overhead", *args],
                          capture_output=True, text=True, timeout=timeout_s, cwd=REPO)


@pytest.mark.engine
def test_llamacpp_server_against_llama_cpp_python(tmp_path: Path) -> None:
    port = free_port()
    done = overhead("--pairs", "llamacpp", "--batches", "1,2", "--requests", "4", "--max-tokens",
                    "16", "--repeats", "1", "--port", str(port), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert not _healthy(f"http://127.0.0.1:{port}")  # the server was stopped
    lines = [line for line in done.stdout.splitlines() if line.startswith("| llamacpp-cpu")]
    assert len(lines) == 1, done.stdout  # batch 1 only: llama-cpp-python does not batch
    batch1 = lines[0].split(" | ")
    assert batch1[1] == "1"
    # TTFT and e2e on both sides, and the overhead in ms and %
    for cell in (batch1[2], batch1[4]):
        server, inprocess = (float(v.replace(",", "")) for v in cell.split(" / "))
        assert server > 0 and inprocess > 0
    assert batch1[3].endswith("%)") and batch1[5].endswith("%)")
    assert batch1[7].startswith("1 / 1 (")
    with (tmp_path / "runs.csv").open() as file:
        runs = list(csv.DictReader(file))
    assert sorted((r["engine"], r["users"]) for r in runs) == [
        ("llama-cpp-python", "1"), ("llamacpp-cpu", "1")]
    assert len({r["workload_sha256"] for r in runs}) == 1  # the same work on both sides
    assert (tmp_path / "overhead.md").read_text() in done.stdout


@pytest.mark.parametrize("args, message", [
    (["--pairs", "tgi"], "unknown pair 'tgi'"),
    (["--batches", "1,x"], "--batches must be positive integers, comma-separated like 1,4,16"),
    (["--batches", "0"], "--batches must be positive integers"),
    (["--batches", "4,4"], "--batches names a value twice"),
    (["--requests", "2,3"], "--requests must be a positive integer"),
    (["--engine-cpus", "99"], "cores this machine does not offer"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_arguments_are_one_error_line(args: list[str], message: str, tmp_path: Path) -> None:
    """The first through the real process, the rest through `rig overhead`'s check in-process."""
    if args == ["--pairs", "tgi"]:
        done = overhead(*args, "--out", str(tmp_path), timeout_s=60)
        code, stderr = done.returncode, done.stderr
    else:
        code, _, stderr = check(BY_NAME["overhead"], [*args, "--out", str(tmp_path)])
    assert code == 2 and message in stderr, stderr
    assert stderr.count("\n") == 1 and stderr.startswith("error: ")


def test_help_exits_0() -> None:
    done = overhead("--help", timeout_s=30)
    assert done.returncode == 0 and "--pairs" in done.stdout
