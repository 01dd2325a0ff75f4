"""In-process engines, for real, on the tiny model: each adapter runs the fixed workload through
the engine library in a worker process of its venv, and its run is recorded as a server run is
(requests.jsonl records, a runs.csv row marked in-process), with exactly --max-tokens tokens
counted by the engine. Run as users run it: `python -m loadtest.inprocess ...`."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rig_helpers import REPO, VLLM_QUICK_ENV, wait_for  # noqa: E402
from test_cli import BY_NAME, check  # noqa: E402 - the commands' checks, in-process

MAX_TOKENS = 24


def inprocess(*args: str, env: dict[str, str] | None = None,
              timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "loadtest.inprocess", *args],
                          capture_output=True, text=True, timeout=timeout_s, cwd=REPO,
                          env={**os.environ, **(env or {})})


def run_and_read(tmp_path: Path, spec: str, batch: int, requests: int,
                 env: dict[str, str] | None = None) -> tuple[dict[str, str], list[dict]]:
    done = inprocess(spec, "--batch", str(batch), "--requests", str(requests), "--max-tokens",
                     str(MAX_TOKENS), "--warmup-requests", "1", "--out", str(tmp_path), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    with (tmp_path / "runs.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == 1
    row = rows[0]
    records = [json.loads(line) for line in
               (tmp_path / "runs" / row["run_id"] / "requests.jsonl").read_text().splitlines()]
    return row, records


def check_run(row: dict[str, str], records: list[dict], engine: str, batch: int, requests: int,
              streamed: bool) -> None:
    assert row["engine"] == engine and row["mode"] == "in-process" and row["host"] == "in-process"
    assert row["users"] == str(batch) and row["requests"] == str(requests)
    assert row["completed"] == str(requests) and row["failed"] == "0"
    assert row["output_tokens_source"] == "engine"
    assert row["min_output_tokens"] == row["max_output_tokens"] == str(MAX_TOKENS)
    assert row["output_tokens"] == str(MAX_TOKENS * requests)
    assert row["workload"] == f"mixed-{requests}x{MAX_TOKENS}" and row["engine_version"]
    assert float(row["output_tok_per_s"]) > 0 and row["model"] == "tiny-llama"
    assert sorted(r["request_id"] for r in records) == list(range(requests))  # no warm-up among them
    for r in records:
        assert r["output_tokens"] == MAX_TOKENS and r["prompt_tokens"] > 0 and r["error_kind"] is None
        assert r["sent_ns"] < r["done_ns"]
        if streamed:
            assert r["sent_ns"] < r["first_chunk_ns"] <= r["done_ns"]
            assert len(r["chunk_gaps_ns"]) == r["output_chunks"] - 1 >= 1
        else:
            assert r["first_chunk_ns"] is None and r["ttft_ms"] is None
    assert bool(row["ttft_p50_ms"]) == streamed


@pytest.mark.engine
def test_workload_hash_matches_a_server_run_of_the_same_workload(tmp_path: Path) -> None:
    """In-process rows carry the workload_sha256 a server run of the same prompts, requests,
    length and sampling carries, so the two sides are known to have had the same work."""
    row, records = run_and_read(tmp_path, "ctranslate2:int8", 1, 4)
    check_run(row, records, "ctranslate2", 1, 4, streamed=True)
    sys.path.insert(0, str(REPO))
    from loadtest.client.workload import build_workload
    from loadtest.cpus import default_layout

    cores = default_layout()[0]  # the engine's cores, recorded first as a local server's runs do
    assert row["flags"] == (f"--cpus {cores} " if cores else "") + "--compute-type int8"

    server = build_workload("mixed", 4, api="completions", model="tiny-llama",
                            max_tokens=MAX_TOKENS, ignore_eos=True)
    assert row["workload_sha256"] == server.sha256


@pytest.mark.engine
def test_ctranslate2_float32_batched(tmp_path: Path) -> None:
    row, records = run_and_read(tmp_path, "ctranslate2:float32", 4, 8)
    check_run(row, records, "ctranslate2", 4, 8, streamed=True)
    assert json.loads(row["engine_settings"])["compute_type"] == "float32"


@pytest.mark.engine
def test_transformers_generate_without_a_streamer_batched(tmp_path: Path) -> None:
    row, records = run_and_read(tmp_path, "transformers-generate", 4, 8)
    check_run(row, records, "transformers-generate", 4, 8, streamed=False)
    # a wave of 4 is sent together and returned together
    waves = {(r["sent_ns"] // 1_000_000, r["done_ns"]) for r in records}
    assert len({done for _, done in waves}) == 2


@pytest.mark.engine
def test_transformers_generate_with_a_streamer(tmp_path: Path) -> None:
    row, records = run_and_read(tmp_path, "transformers-generate:streamer", 1, 4)
    check_run(row, records, "transformers-generate", 1, 4, streamed=True)
    assert row["flags"].endswith("--streamer")
    assert all(r["output_chunks"] == MAX_TOKENS for r in records)  # one put() per step


@pytest.mark.engine
def test_llama_cpp_python(tmp_path: Path) -> None:
    row, records = run_and_read(tmp_path, "llama-cpp-python", 1, 4)
    check_run(row, records, "llama-cpp-python", 1, 4, streamed=True)
    assert all(r["output_chunks"] == MAX_TOKENS for r in records)  # one token per yield
    # the libllama linked from llama-server's own build, beside it
    assert json.loads(row["engine_settings"])["lib"] == str(REPO / "build" / "llama.cpp" / "cpu" / "bin")


@pytest.mark.engine
def test_vllm_offline_keeps_the_batch_in_flight(tmp_path: Path) -> None:
    """The adapter's closed loop over `LLM`'s engine, its core in the worker's own process
    (VLLM_QUICK_ENV): the steps and their outputs are the same; loaded, run and shut down in
    about 20 s here instead of 45 s (vLLM's core process imports torch and vLLM again, and
    takes seconds to stop)."""
    row, records = run_and_read(tmp_path, "vllm-offline:eager", 4, 8, env=VLLM_QUICK_ENV)
    check_run(row, records, "vllm-offline", 4, 8, streamed=True)
    assert "--enforce-eager" in row["flags"].split()
    # closed loop: the first 4 start together, each later one when an earlier one finishes
    first = sorted(records, key=lambda r: r["sent_ns"])
    assert first[3]["sent_ns"] < min(r["done_ns"] for r in records)
    assert first[4]["sent_ns"] >= min(r["done_ns"] for r in records)


@pytest.mark.parametrize("args, message", [
    (["nope"], "unknown in-process engine 'nope'"),
    (["ctranslate2:fp16"], "ctranslate2 has no variant 'fp16'; one of: ctranslate2:float32, ctranslate2:int8, "
                          "ctranslate2:cuda, ctranslate2:cuda-int8"),
    (["llama-cpp-python", "--batch", "4"], "llama-cpp-python runs one sequence at a time"),
    (["vllm-offline", "--batch", "0"], "--batch must be positive integers"),
    (["vllm-offline", "--batch", "4,4"], "--batch names a value twice"),
    (["vllm-offline", "--prompts", "/nonexistent.jsonl"], "no prompt file"),
    (["vllm-offline", "--engine-cpus", "99"], "cores this machine does not offer"),
])
def test_bad_input_is_one_error_line(args: list[str], message: str, tmp_path: Path) -> None:
    """Through `rig inprocess`'s check in-process, but the first and the two the check leaves to
    the run (the batch an engine takes, the prompt file) through the real process."""
    if args[0] in ("nope", "llama-cpp-python") or "--prompts" in args:
        done = inprocess(*args, "--out", str(tmp_path))
        code, stderr = done.returncode, done.stderr
    else:
        code, _, stderr = check(BY_NAME["inprocess"], [*args, "--out", str(tmp_path)])
    assert code == 2 and message in stderr, stderr
    assert stderr.count("\n") == 1 and stderr.startswith("error: ")
    assert not (tmp_path / "runs.csv").exists()


@pytest.mark.engine
def test_a_missing_engine_names_its_install_step(tmp_path: Path) -> None:
    """An engine that is not installed is one line naming the command that installs it."""
    done = inprocess("llama-cpp-python", "--out", str(tmp_path),
                     env={"LLAMA_CPP_LIB_PATH": str(tmp_path)})  # no libllama there
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: llama-cpp-python is not usable")
    assert done.stderr.rstrip().endswith("run scripts/install_inprocess.sh llama-cpp-python")
    assert done.stderr.count("\n") == 1
    done = inprocess("transformers-generate", "--out", str(tmp_path),
                     env={"RIG_TRANSFORMERS_PYTHON": str(tmp_path / "python")})
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.rstrip().endswith("run scripts/install.sh"), done.stderr
    assert not (tmp_path / "runs.csv").exists()


def test_help_exits_0() -> None:
    done = inprocess("--help")
    assert done.returncode == 0 and "ENGINE[:VARIANT]" in done.stdout
    assert "ctranslate2:int8" in done.stdout


def test_a_runs_csv_a_row_would_corrupt_is_refused_before_the_run(tmp_path: Path) -> None:
    (tmp_path / "runs.csv").write_text("run_id,engine\nx,y,z\n")
    done = inprocess("ctranslate2", "--out", str(tmp_path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "has 3 cells for 2 columns" in done.stderr and not (tmp_path / "runs").exists()


@pytest.mark.engine
def test_several_batch_sizes_on_one_engine(tmp_path: Path) -> None:
    """--batch 1,4: each size its own run and row, on the engine loaded once, at least 4
    requests per sequence; each size warmed up first, warm-ups never recorded."""
    done = inprocess("ctranslate2:float32", "--batch", "1,4", "--requests", "4", "--max-tokens",
                     str(MAX_TOKENS), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    with (tmp_path / "runs.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert [(r["users"], r["requests"], r["completed"]) for r in rows] == [("1", "4", "4"), ("4", "16", "16")]
    assert rows[0]["workload"] == f"mixed-4x{MAX_TOKENS}" and rows[1]["workload"] == f"mixed-16x{MAX_TOKENS}"
    assert [r["warmup_requests"] for r in rows] == ["2", "4"]
    assert rows[0]["engine_load_s"] == rows[1]["engine_load_s"]  # loaded once


def test_install_script_help_and_unknown_engine() -> None:
    script = str(REPO / "scripts" / "install_inprocess.sh")
    done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.startswith("usage: scripts/install_inprocess.sh")
    done = subprocess.run([script, "tgi"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("error: unknown in-process engine 'tgi'")


@pytest.mark.engine  # where the engines are missing (scripts/test.sh --fast) a re-run builds them
def test_install_script_rerun_only_checks() -> None:
    """Installed already (CI ran it before the tests): a re-run only checks, in seconds."""
    done = subprocess.run([str(REPO / "scripts" / "install_inprocess.sh")], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "present" in done.stderr, done.stderr


@pytest.mark.engine
def test_sigterm_mid_run_stops_the_worker_and_adds_no_row(tmp_path: Path) -> None:
    import signal

    import psutil

    process = subprocess.Popen(
        [str(REPO / ".venv" / "bin" / "python"), "-m", "loadtest.inprocess", "transformers-generate",
         "--requests", "500", "--max-tokens", "200", "--out", str(tmp_path)],
        cwd=REPO, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if "loaded in" in line:
                break
        wait_for(lambda: psutil.Process(process.pid).children(recursive=True), "a worker started")
        workers = psutil.Process(process.pid).children(recursive=True)
        process.send_signal(signal.SIGTERM)
        rest = process.stderr.read()
        assert process.wait(timeout=60) == 130
    finally:
        process.kill()
    assert rest.strip().splitlines()[-1] == "error: interrupted; the worker was stopped"
    assert not [w for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]
    assert not (tmp_path / "runs.csv").exists()
