"""Helpers the tests share: the repository root, a free port, the Locust CLI as users run it
(and its checks in-process), the pacing server, an engine crashed under a run, a run's size
from the engine's speed.

(Not in conftest.py: tests/compose has a conftest of its own, and `from conftest import` would
pick whichever pytest imported first.)
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# The locustfile, for locustfile_checks: imported here, before any test runs, because Locust's
# gevent patching (done where Locust is first imported) deadlocks on the import lock when it
# first happens inside a test. The whole session runs patched so, as it did wherever
# tests/test_cli.py was collected (it imports Locust).
import loadtest.engines as locustfile  # noqa: E402,I001 - Locust first: it monkey-patches
from locust.argument_parser import get_parser

from loadtest.launch.command import locust_command
from loadtest.launch.processes import free_port  # noqa: F401 - the tests import it from here
from loadtest.launch.checks import check_run_options
from loadtest.client.options import ConfigError
from loadtest.workload import WorkloadError

REPO = Path(__file__).resolve().parents[1]
# The tiny model scripts/install.sh makes (the full suite's install; `scripts/test.sh --fast` on a
# fresh clone installs the rig alone): a fast test that reads its tokenizer or config skips without it.
needs_tiny_model = pytest.mark.skipif(
    not (REPO / "models" / "tiny-llama" / "tokenizer.json").is_file(),
    reason="models/tiny-llama not made yet (scripts/install.sh)")
# vLLM's flag for no torch.compile warm-up: the tests whose vLLM only has to answer start it so.
VLLM_EAGER = "--enforce-eager"
# vLLM's environment for those tests (and their containers: tests/compose/quick.yml): its model
# runs in the engine-core process (no worker process, which imports torch and vLLM again),
# forked. Healthy in 30-37 s instead of 46-49 s (eager, one core); these tests are of the rig
# against vLLM's server, which answers the same.
VLLM_QUICK_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_WORKER_MULTIPROC_METHOD": "fork"}
# vLLM's `hf` reasoning parser reads the model's own response template (tokenizer_config.json):
# this one names the tiny model's reasoning markers (tests/test_reasoning_engine.py says why).
RESPONSE_TEMPLATE = {"version": 1, "start_anchor": "assistant: ",
                     "fields": {"thinking": {"open": "<think>", "close": "</think>"},
                                "content": {}}}
# The suite's shared vLLM serves tool calls as a user serving them would start it
# (tests/test_structured_engine.py): `--enable-auto-tool-choice` and a tool-call parser
# (`pythonic` reads text, so it runs on the tiny tokenizer; `tool_choice` required is then
# constrained by vLLM's own JSON schema), with xgrammar's `disable_any_whitespace`: a
# random-weight model otherwise fills a JSON answer with whitespace up to max_tokens. Requests
# with no tools and no constraint are served as without these flags.
VLLM_TOOLS = ["--enable-auto-tool-choice", "--tool-call-parser", "pythonic",
              "--structured-outputs-config",
              json.dumps({"backend": "xgrammar", "disable_any_whitespace": True})]


def reasoning_model(folder: Path) -> Path:
    """The tiny model's folder with a response template that names its reasoning markers."""
    model = REPO / "models" / "tiny-llama"
    folder.mkdir()
    for item in model.iterdir():
        if item.name != "tokenizer_config.json":
            (folder / item.name).symlink_to(item)
    config = json.loads((model / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(
        json.dumps({**config, "response_template": RESPONSE_TEMPLATE}))
    return folder


def run_locust(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    """The rig's Locust CLI exactly as a user runs it (one user unless `args` say --users)."""
    cmd = locust_command(host="", users=1, rig_options=["--only-summary", *args])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=REPO)


def locustfile_checks(*args: str) -> subprocess.CompletedProcess[str]:
    """What `run_locust(*args)` answers before it asks the engine anything, found in-process
    (about 100 times cheaper than a process, for walking many bad values): Locust's own parser
    with the locustfile's hook on it (init_command_line_parser: the rig's options, and Locust's
    own checked as `rig run` checks them), then the checks the locustfile makes first
    (check_run_options), refused as it refuses. Exit 2 and its `error:` line, or 0 where every
    check passed (the real run would go on to the engine). Each test that walks values here
    keeps one case through the real process (run_locust): the wiring."""
    cmd = locust_command(host="", users=1, rig_options=["--only-summary", *args])
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.chdir(REPO), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            options = get_parser(default_config_files=[]).parse_args(cmd[cmd.index("-f"):])
            try:
                check_run_options(options, options.host)
            except (ConfigError, WorkloadError) as exc:
                locustfile._refuse(str(exc))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(cmd, code, out.getvalue(), err.getvalue())


def first_through_the_process(cases: list[tuple]) -> list[tuple]:
    """Parametrize cases of locustfile refusals, each with how to run it added last: the first
    through the real process (run_locust: the wiring), the rest through locustfile_checks."""
    return [(*case, run_locust if i == 0 else locustfile_checks) for i, case in enumerate(cases)]


def requests_lasting(url: str, seconds: float, out: Path, *workload: str, users: int = 1,
                     probe: int = 24) -> tuple[int, str]:
    """How many requests of `workload` (rig options: --engine, --prompts, --max-tokens, ...)
    keep `users` users busy on the engine at `url` for about `seconds`, measured now: a warm-up
    run, then `probe` requests timed. Returns the count and what was measured (for the failure
    messages of the test it sizes). Tests size their runs so, not from a speed written in the
    test: the machines that run them differ in speed by several times (issue 38)."""
    common = ["--host", url, "--users", str(users), *workload, "--telemetry-interval", "0",
              "--out", str(out)]
    warm = run_locust(*common, "--requests", str(max(2, users)), "--warmup")
    assert warm.returncode == 0, warm.stderr[-2000:]
    done = run_locust(*common, "--requests", str(probe))
    assert done.returncode == 0, done.stderr[-2000:]
    with (out / "runs.csv").open(newline="") as file:
        took_s = float(list(csv.DictReader(file))[-1]["completion_time_s"])
    count = max(probe, math.ceil(probe * seconds / took_s))
    return count, f"{probe} requests at {users} users took {took_s:.2f} s, so {count} for {seconds:g} s"


@contextmanager
def running_pacer(*args: str, timeout_s: float = 30) -> Iterator[str]:
    """The pacing server (loadtest/calibration/pacer.py) in its own process on a free port;
    yields its URL and stops it at the end."""
    with _listening([sys.executable, "-m", "loadtest.calibration.pacer", *args],
                    timeout_s) as url:
        yield url


@contextmanager
def running_fault_proxy(upstream: str, *args: str, timeout_s: float = 30) -> Iterator[str]:
    """tests/fault_proxy.py in front of `upstream` on a free port; yields its URL."""
    with _listening([sys.executable, str(REPO / "tests" / "fault_proxy.py"), "--upstream",
                     upstream, *args], timeout_s) as url:
        yield url


@contextmanager
def running_fuzz_engine(timeout_s: float = 30) -> Iterator[str]:
    """tests/fuzz_engine.py, a misbehaving engine, on a free port; yields its URL."""
    with _listening([sys.executable, str(REPO / "tests" / "fuzz_engine.py")], timeout_s) as url:
        yield url


@contextmanager
def _listening(cmd: list[str], timeout_s: float) -> Iterator[str]:
    """Start `cmd --port P` and wait for the "listening" line it prints once it accepts."""
    port = free_port()
    process = subprocess.Popen([*cmd, "--port", str(port)], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        line = process.stdout.readline()
        assert "listening" in line, line + process.stdout.read()
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout_s)


def crash_under_run(url: str, out: Path, crash: Callable[[], None], *args: str,
                    requests: int = 40, max_tokens: int = 256, users: int = 4) -> Path:
    """Run the fixed workload against `url`, call `crash` once a few requests have finished,
    and wait for the run to end; the run must end by itself, with exit 1 (requests failed, the
    rig did not). Returns the run's requests.jsonl."""
    cmd = locust_command(host=url, users=users, rig_options=[
        "--only-summary", "--requests", str(requests), "--max-tokens", str(max_tokens),
        "--ignore-eos", "--out", str(out), *args])
    locust = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=REPO)
    requests_log = None
    deadline = time.monotonic() + 120
    while requests_log is None and time.monotonic() < deadline:
        logs = list(out.glob("runs/*/requests.jsonl"))
        if logs and len(logs[0].read_text().splitlines()) >= 4:
            requests_log = logs[0]
        time.sleep(0.1)
    if requests_log is None:
        locust.kill()
    assert requests_log is not None, "no request finished before the crash"
    crash()
    _, stderr = locust.communicate(timeout=120)
    assert locust.returncode == 1, stderr[-2000:]
    return requests_log


def assert_every_request_accounted(requests_log: Path, out: Path, requests: int = 40,
                                   max_tokens: int = 256,
                                   kinds: frozenset[str] = frozenset({"truncated", "connect"}),
                                   ) -> list[dict]:
    """Every request of the crashed run has one record, each a whole answer or a failure with
    its reason (by default: cut mid-stream, or no connection); the row counts them. Returns the
    records."""
    records = [json.loads(line) for line in requests_log.read_text().splitlines()]
    assert sorted(r["request_id"] for r in records) == list(range(requests))
    ok = [r for r in records if r["error_kind"] is None]
    failed = [r for r in records if r["error_kind"] is not None]
    assert len(ok) >= 4 and failed
    assert {r["error_kind"] for r in failed} <= kinds, failed[:3]
    assert all(r["output_tokens"] == max_tokens for r in ok)
    with (out / "runs.csv").open(newline="") as file:
        [row] = list(csv.DictReader(file))
    assert (int(row["completed"]), int(row["failed"])) == (len(ok), len(failed))
    assert int(row["output_tokens"]) == max_tokens * len(ok)
    assert row["verdict"] == "invalid" and "failed_requests" in row["verdict_reasons"]
    return records


def wait_for(condition: Callable[[], object], what: str, timeout_s: float = 120,
             poll_s: float = 0.1) -> None:
    """Wait until `condition()` is true (instead of sleeping a guessed time before a signal)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:g} s"
        time.sleep(poll_s)


def records_written(out: Path, at_least: int = 1) -> bool:
    """At least `at_least` requests of a run under `out` have their record written."""
    return any(len(log.read_text().splitlines()) >= at_least
               for log in out.rglob("runs/*/requests.jsonl"))


def streams_at_once(requests_jsonl: Path) -> int:
    """The most answers that streamed at once (first token chunk to last), from a run's records:
    an engine with one slot streams one at a time, with more slots several, however fast the host
    (its completion time need not be shorter: batching pays only where the host has cores). The
    last token, not the stream's end: llama-server frees the slot before its closing usage chunk
    and [DONE], so the next answer may begin before the last one's stream ends."""
    edges = []
    for line in requests_jsonl.read_text().splitlines():
        record = json.loads(line)
        if record.get("first_chunk_ns"):
            last = record["first_chunk_ns"] + sum(record.get("chunk_gaps_ns") or [])
            edges += [(record["first_chunk_ns"], 1), (last, -1)]
    most = streaming = 0
    for _, step in sorted(edges):  # an end before a start at the same instant
        streaming += step
        most = max(most, streaming)
    return most


def markdown_tables(markdown: str) -> list[list[dict[str, str]]]:
    """Every Markdown table in `markdown`, each as one dict per row keyed by its header."""
    tables, lines = [], markdown.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("|---") and index:
            header = [c.strip() for c in lines[index - 1].strip()[1:-1].split(" | ")]
            rows = []
            for body in lines[index + 1:]:
                if not body.startswith("| "):
                    break
                rows.append(dict(zip(header, [c.strip() for c in body.strip()[1:-1].split(" | ")])))
            tables.append(rows)
    return tables


@contextmanager
def running_web_ui(engine_url: str, out: Path, *rig_options: str,
                   users: int = 2, base_path: str = "") -> Iterator[str]:
    """`locust -f loadtest/engines.py` with its web UI (not headless) on a free port, against
    `engine_url`, results in `out`, its output in `out`/../locust.log; yields the UI's URL once
    it answers (under Locust's --web-base-path `base_path` if given), and stops Locust at the
    end."""
    import urllib.request

    port = free_port()
    ui = f"http://127.0.0.1:{port}{base_path.rstrip('/')}"
    if base_path:
        rig_options = ("--web-base-path", base_path, *rig_options)
    log = out.parent / "locust.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            locust_command(host=engine_url, users=users, headless=False, rig_options=[
                "--web-host", "127.0.0.1", "--web-port", str(port), "--engine", "vllm",
                "--model", "pacer", "--telemetry-interval", "0", "--out", str(out),
                *rig_options]),
            cwd=REPO, stdout=output, stderr=subprocess.STDOUT, text=True)

    def up() -> bool:
        try:
            urllib.request.urlopen(ui + "/", timeout=1).close()
            return True
        except OSError:
            assert process.poll() is None, log.read_text()[-3000:]
            return False

    try:
        wait_for(up, "the web UI up", timeout_s=60)
        yield ui
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(timeout=30)
