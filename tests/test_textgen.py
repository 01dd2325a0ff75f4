"""text-generation-webui's API (textgen-cpu) as a local engine, driven by the rig.

Needs scripts/install_textgen.sh's source and venv, and scripts/build_llamacpp.sh's llama-server
and GGUF (skipped, with the reason, where they are missing); the Transformers test also needs
``install_textgen.sh --transformers``. The install script's own refusals need none of it.

Two facts of this engine the tests pin down: its llama.cpp loader serves the rig's own
llama-server binary, and its ``usage.completion_tokens`` is the answer re-tokenized, not the
tokens generated (a random-weight model's byte tokens re-tokenize to more), so exact lengths
are checked against its llama-server's own counter.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from loadtest.local_engine import EngineStartError, LocalEngine
from rig_helpers import REPO, crash_under_run, free_port, run_locust
from servers.llamacpp_cpu import LLAMA_SERVER
from servers import SettingError, translate
from servers.textgen import ENGINE as TEXTGEN_GPU
from servers.textgen_cpu import ENGINE as TEXTGEN_CPU, RECIPE, SOURCE, VENV_PYTHON

INSTALL = REPO / "scripts" / "install_textgen.sh"


def _skip_unless_installed() -> None:
    why = RECIPE.missing()
    if why:
        pytest.skip(why)


@pytest.fixture
def textgen(tmp_path: Path) -> Iterator[LocalEngine]:
    """Per test (it starts in about 10 s): a module-wide one would still run beside the
    engine-free tests of this module, which the test tiers' watch fails."""
    _skip_unless_installed()
    with LocalEngine(port=free_port(), log_path=tmp_path / "engine.log", engine="textgen-cpu") as running:
        yield running


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def _inner_llama_server(engine: LocalEngine) -> psutil.Process:
    assert engine.process is not None
    [child] = [p for p in psutil.Process(engine.process.pid).children(recursive=True)
               if p.exe() == str(LLAMA_SERVER.resolve())]
    return child


def _inner_url(engine: LocalEngine) -> str:
    server = _inner_llama_server(engine)
    argv = server.cmdline()
    return f"http://127.0.0.1:{argv[argv.index('--port') + 1]}"


def _predicted_tokens(engine: LocalEngine) -> int:
    with urllib.request.urlopen(_inner_url(engine) + "/metrics", timeout=30) as response:
        lines = response.read().decode().splitlines()
    [line] = [line for line in lines if line.startswith("llamacpp:tokens_predicted_total ")]
    return int(float(line.split()[1]))


def _row(out: Path) -> dict[str, str]:
    with (out / "runs.csv").open(newline="") as file:
        (row,) = list(csv.DictReader(file))
    return row


def _records(out: Path) -> list[dict]:
    [path] = out.glob("runs/*/requests.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.engine
def test_health_and_its_llama_server_is_the_rigs_binary(textgen: LocalEngine) -> None:
    assert _get(textgen.url + "/v1/internal/health") == {"status": "ok"}
    assert _get(textgen.url + "/v1/internal/model/info")["model_name"] == "tiny-llama.gguf"
    argv = _inner_llama_server(textgen).cmdline()
    assert argv[argv.index("--parallel") + 1] == "128" and "--metrics" in argv
    assert _get(_inner_url(textgen) + "/health") == {"status": "ok"}


@pytest.mark.engine
def test_a_rig_run_gets_every_answer_and_exactly_max_tokens_generated(textgen: LocalEngine,
                                                                      tmp_path: Path) -> None:
    before = _predicted_tokens(textgen)
    result = run_locust("--engine", "textgen-cpu", "--host", textgen.url, "--users", "8",
                        "--requests", "32", "--max-tokens", "16", "--ignore-eos", "--out", str(tmp_path))
    row, records = _row(tmp_path), _records(tmp_path)
    assert (row["requests"], row["completed"], row["failed"]) == ("32", "32", "0"), result.stderr[-2000:]
    assert row["engine"] == "textgen-cpu" and row["model"] == "tiny-llama.gguf"
    assert {r["finish_reason"] for r in records} == {"length"}
    # --ignore-eos reached its llama-server as ban_eos_token: 16 tokens each, by its own count.
    assert _predicted_tokens(textgen) - before == 32 * 16


@pytest.mark.engine
def test_its_api_killed_mid_run_ends_the_run_and_stop_leaves_nothing(tmp_path: Path) -> None:
    """The API process dies (SIGKILL, its llama-server child orphaned as upstream leaves it):
    every request has its record, the run ends by itself with exit 1, and stop() ends the
    orphan with the rest of the group."""
    _skip_unless_installed()
    out = tmp_path / "out"
    engine = LocalEngine(port=free_port(), log_path=tmp_path / "engine.log", engine="textgen-cpu")
    engine.start(timeout_s=180)
    try:
        assert engine.process is not None
        api = engine.process.pid
        log = crash_under_run(engine.url, out, lambda: os.kill(api, signal.SIGKILL),
                              "--engine", "textgen-cpu", requests=40, max_tokens=64)
        records = [json.loads(line) for line in log.read_text().splitlines()]
        assert sorted(r["request_id"] for r in records) == list(range(40))
        failed = [r for r in records if r["error_kind"] is not None]
        assert failed and {r["error_kind"] for r in failed} <= {"truncated", "connect"}
        row = _row(out)
        assert (int(row["completed"]), int(row["failed"])) == (40 - len(failed), len(failed))
        assert row["verdict"] == "invalid"
    finally:
        engine.stop()
    assert _group_gone(api)


@pytest.mark.engine
def test_a_model_it_cannot_load_is_one_error_line_and_nothing_left(tmp_path: Path) -> None:
    _skip_unless_installed()
    port, pidfile = free_port(), tmp_path / "pid"
    started = subprocess.run(
        [str(REPO / ".venv/bin/python"), "-m", "loadtest.local_engine", "--engine", "textgen-cpu",
         "--port", str(port), "--pidfile", str(pidfile), "--log", str(tmp_path / "engine.log"),
         "--timeout", "120", "start", "--", "--model", "no-such-model.gguf"],
        capture_output=True, text=True, timeout=180, cwd=REPO)
    assert started.returncode == 2
    assert started.stderr.startswith("error: engine exited (2)")
    assert started.stderr.strip().splitlines()[-1] == (
        "error: text-generation-webui could not load the model 'no-such-model.gguf' with its "
        "loader (see the lines above): give a model file or folder that loader reads")
    assert not pidfile.exists() and not [p for p in psutil.process_iter(["cmdline"])
                                         if f"--api-port {port}" in " ".join(p.info["cmdline"] or [])]


@pytest.mark.engine
def test_a_port_taken_is_one_error_line_not_another_port(tmp_path: Path) -> None:
    """Upstream moves to a free port when its own is taken; the rig would wait on the wrong one."""
    _skip_unless_installed()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        engine = LocalEngine(port=port, log_path=tmp_path / "engine.log", engine="textgen-cpu")
        with pytest.raises(EngineStartError) as raised:
            engine.start(timeout_s=60)
    assert str(raised.value).splitlines()[-1] == (
        f"error: port {port} is already taken: stop what listens there or start textgen on another port")
    assert engine.process is not None and _group_gone(engine.process.pid)


@pytest.mark.engine
def test_the_transformers_loader_serves_the_tiny_model_one_request_at_a_time(tmp_path: Path) -> None:
    _skip_unless_installed()
    has_torch = subprocess.run([str(VENV_PYTHON), "-c", "import torch, transformers"],
                               capture_output=True, check=False).returncode == 0
    if not has_torch:
        pytest.skip("no Transformers loader in .venv-textgen: run scripts/install_textgen.sh --transformers")
    with LocalEngine(port=free_port(), log_path=tmp_path / "engine.log", engine="textgen-cpu",
                     extra_args=["--loader", "Transformers"]) as engine:
        assert _get(engine.url + "/v1/internal/model/info")["loader"] == "Transformers"
        result = run_locust("--engine", "textgen-cpu", "--host", engine.url, "--users", "2",
                            "--requests", "4", "--max-tokens", "8", "--ignore-eos", "--out", str(tmp_path))
        row = _row(tmp_path)
        assert (row["completed"], row["failed"]) == ("4", "0"), result.stderr[-2000:]


def test_a_missing_loader_is_one_error_line(tmp_path: Path) -> None:
    """boot.py refuses the Transformers loader where torch is missing, before anything starts
    (here the rig's own interpreter, which has no torch, stands in for textgen's)."""
    rig_python = REPO / ".venv/bin/python"
    if subprocess.run([str(rig_python), "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip("the rig's venv has torch: it cannot stand in for a venv without the loader")
    boot = subprocess.run([str(rig_python), str(REPO / "servers/textgen-cpu/boot.py"), str(tmp_path),
                           "--api-port", str(free_port()), "--loader", "Transformers"],
                          capture_output=True, text=True, timeout=60)
    assert (boot.returncode, boot.stdout) == (2, "")
    assert boot.stderr == ("error: text-generation-webui's Transformers loader is not installed here: "
                           "run scripts/install_textgen.sh --transformers\n")


def _install_in(root: Path, tarball: Path) -> subprocess.CompletedProcess[str]:
    """install_textgen.sh from a copy of the rig at `root`, with no source but `tarball` and
    a git remote that does not exist."""
    (root / "scripts").mkdir(parents=True, exist_ok=True)
    shutil.copy(INSTALL, root / "scripts")
    shutil.copy(INSTALL.with_name("venv.sh"), root / "scripts")  # what it sources
    env = {**os.environ, "TEXTGEN_TARBALL": str(tarball), "TEXTGEN_GIT_URL": str(root / "no-such-repo")}
    return subprocess.run(["bash", str(root / "scripts" / INSTALL.name)], capture_output=True, text=True,
                          env=env, timeout=60)


def test_no_source_is_one_error_line_and_nothing_written(tmp_path: Path) -> None:
    installed = _install_in(tmp_path, tmp_path / "missing.tar.gz")
    assert installed.returncode == 1
    assert installed.stderr.startswith("error: no text-generation-webui source: put its tarball at ")
    assert len(installed.stderr.splitlines()) == 1
    assert not (tmp_path / "build" / "textgen").exists() and not (tmp_path / ".venv-textgen").exists()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=4096))
def test_a_corrupt_tarball_is_one_error_line_and_nothing_written(tmp_path: Path, content: bytes) -> None:
    root = tmp_path / f"rig-{content.hex()[:16]}-{len(content)}"
    tarball = root / "text-generation-webui.tar.gz"
    root.mkdir(exist_ok=True)
    tarball.write_bytes(content)
    installed = _install_in(root, tarball)
    assert installed.returncode == 1
    assert installed.stderr == (f"error: {tarball} is not text-generation-webui 1dcde41d03d1 (its sha256 "
                                "differs): fetch it again, or remove it to clone the commit instead\n")
    assert not (root / "build").exists() and not (root / ".venv-textgen").exists()


def test_its_opening_empty_chunk_is_not_the_first_token() -> None:
    """text-generation-webui sends an empty completion chunk before it generates (and never an
    empty one for a token): counted as the first token, it made TTFT the time to that chunk,
    26 ms where its first token came after 704 ms in the generation lock's queue."""
    from loadtest.client.protocols import openai
    from servers.textgen_cpu import SPEC
    opening = (b'data: {"id": "cmpl-1", "object": "text_completion", "model": "tiny-llama.gguf", '
               b'"choices": [{"index": 0, "finish_reason": null, "text": "", "logprobs": null}], "usage": null}')
    assert SPEC.target.empty_chunk_is_token is False
    event = openai.parse_line(opening, empty_chunk_is_token=SPEC.target.empty_chunk_is_token)
    assert event is not None and not event.output
    assert openai.parse_line(opening).output  # vLLM's empty chunk is a byte-level token
    token = opening.replace(b'"text": ""', b'"text": " the"')
    assert openai.parse_line(token, empty_chunk_is_token=False).output


def test_an_answer_it_streamed_no_text_of_is_counted_and_warned_about() -> None:
    """Its stream for an answer whose text it withheld (a stray byte's U+FFFD, docs/textgen.md):
    no line carries a token; the request is completed, without TTFT, and counted in the row."""
    from loadtest.client.protocols import openai
    from loadtest.results.checks import check_run
    from loadtest.results.record import RequestRecord
    from loadtest.results.summary import summarize
    head = b'data: {"id": "cmpl-1", "object": "text_completion", "model": "tiny-llama.gguf", '
    stream = [head + b'"choices": [{"index": 0, "finish_reason": null, "text": "", "logprobs": null}], "usage": null}',
              head + b'"choices": [{"index": 0, "finish_reason": "length", "text": "", "logprobs": null}], "usage": null}',
              head + b'"choices": [], "usage": {"prompt_tokens": 35, "completion_tokens": 42, "total_tokens": 77}}',
              b"data: [DONE]"]
    events = [openai.parse_line(line, empty_chunk_is_token=False) for line in stream]
    assert not any(event.output for event in events if event is not None)
    empty = RequestRecord(0, "write-haiku", 0.0, 0, done_ns=400_000_000, output_tokens=42, output_tokens_source="usage",
                          finish_reason="length")
    answered = RequestRecord(1, "code-sql", 0.0, 0, first_chunk_ns=90_000_000, done_ns=450_000_000,
                             output_chunks=32, output_tokens=32, output_tokens_source="usage", finish_reason="length")
    row = summarize([empty, answered])
    assert (row["completed"], row["empty_answers"], row["ttft_p50_ms"]) == (2, 1, 90.0)
    assert "empty_answers" in check_run(row)
    assert "empty_answers" not in check_run(summarize([answered]))



def _usage_row(**changes: object) -> dict:
    """A 16 x 32 --ignore-eos run's row as its usage counted it: re-tokenized, 26 to 41 each."""
    return {"requests": 16, "requests_sent": 16, "completed": 16, "failed": 0, "max_tokens": 32,
            "ignore_eos": True, "completion_time_s": 2.0, "output_tokens": 560, "avg_output_tokens": 35.0,
            "min_output_tokens": 26, "max_output_tokens": 41, "output_tokens_source": "usage",
            "output_tok_per_s": 280.0, **changes}


def test_its_runs_output_tokens_are_its_llama_servers_counter_when_it_can_be_read() -> None:
    from loadtest.results.verdict import judge
    from loadtest.telemetry.output_counter import SOURCE, counted_by_engine, counter_url
    from servers.textgen_cpu import SPEC
    assert SPEC.target.output_tokens_counter == (("llamacpp:tokens_predicted_total", "exllamav3:new_tokens_total"), 5)
    assert counter_url("http://127.0.0.1:5000/v1", 5) == "http://127.0.0.1:5005"
    assert "unequal_work" in judge(_usage_row())[1]
    row = _usage_row()
    row.update(counted_by_engine(row, 1000.0, 1512.0))
    assert (row["output_tokens"], row["output_tokens_source"], row["output_tok_per_s"]) == (512, SOURCE, 256.0)
    assert (row["min_output_tokens"], row["avg_output_tokens"], row["max_output_tokens"]) == (32, 32.0, 32)
    assert "unequal_work" not in judge(row)[1]
    # fewer than 16 x 32: the total is the engine's, the per-request spread stays usage's
    short = _usage_row()
    short.update(counted_by_engine(short, 0.0, 500.0))
    assert (short["output_tokens"], short["min_output_tokens"]) == (500, 26)
    assert "unequal_work" in judge(short)[1]
    # unreadable, or a failed request's tokens in the counter, or a counter that went back: usage
    for row, before, after in ((_usage_row(), None, 512.0), (_usage_row(), 0.0, None),
                               (_usage_row(completed=15, failed=1), 0.0, 480.0),
                               (_usage_row(), 600.0, 88.0)):
        assert counted_by_engine(row, before, after) == {}


def test_an_engine_without_the_counter_in_its_spec_reads_none() -> None:
    from loadtest.telemetry.output_counter import read_output_counter
    from servers.llamacpp_cpu import SPEC
    assert SPEC.target.output_tokens_counter is None
    assert read_output_counter("http://127.0.0.1:1", SPEC.target) is None


@pytest.mark.engine
def test_a_16_by_32_run_counts_512_from_its_llama_server_and_is_not_unequal_work(textgen: LocalEngine,
                                                                               tmp_path: Path) -> None:
    result = run_locust("--engine", "textgen-cpu", "--host", textgen.url, "--users", "4",
                        "--requests", "16", "--max-tokens", "32", "--ignore-eos", "--out", str(tmp_path))
    row, records = _row(tmp_path), _records(tmp_path)
    assert (row["completed"], row["failed"]) == ("16", "0"), result.stderr[-2000:]
    assert (row["output_tokens"], row["output_tokens_source"]) == ("512", "engine_counter:sole_client")
    assert (row["min_output_tokens"], row["max_output_tokens"]) == ("32", "32")
    assert "unequal_work" not in row["verdict_reasons"] and "uneven_output_lengths" not in row["warnings"]
    # the records keep the counts its answers gave (usage, or chunks where a stream had none)
    assert {r["output_tokens_source"] for r in records} <= {"usage", "chunks"}


# --- The GPU Compose service (servers/textgen.py): its settings as the llama.cpp loader's flags.

def _server_py_flags() -> set[str]:
    """Every flag text-generation-webui's server.py parses at the pinned commit (modules/shared.py)."""
    shared = SOURCE / "modules" / "shared.py"
    if not shared.exists():
        pytest.skip(f"no text-generation-webui source at {SOURCE}: run scripts/install_textgen.sh")
    return set(re.findall(r"['\"](--[a-z][a-z0-9_-]*)['\"]", shared.read_text()))


def test_gpu_service_maps_slots_and_speculation_to_the_loaders_flags() -> None:
    argv = translate("textgen", {"MODEL": "m.gguf", "MAX_CONCURRENT_REQUESTS": "8", "SPECULATE": "4"})
    assert argv[argv.index("--loader") + 1] == "llama.cpp"
    assert argv[argv.index("--n-gpu-layers") + 1] == "999"
    assert argv[argv.index("--model") + 1] == "m.gguf"
    assert argv[argv.index("--parallel") + 1] == "8"
    assert argv[argv.index("--spec-type"):argv.index("--spec-type") + 4] == ["--spec-type", "ngram-simple",
                                                                             "--draft-max", "4"]
    assert "--parallel" not in translate("textgen", {})  # upstream's default: one slot


def test_gpu_service_is_counted_as_textgen_cpu_by_its_llama_servers_counter() -> None:
    from servers.textgen import SPEC as GPU_SPEC
    from servers.textgen_cpu import SPEC as CPU_SPEC
    argv = translate("textgen", {"HOST": "127.0.0.1", "PORT": "6000"})
    # its loader hands "metrics" to the llama-server it starts (--metrics), on the API port + 5
    assert argv[argv.index("--extra-flags") + 1] == "metrics"
    assert argv[argv.index("--api-port") + 1] == "6000" and argv[argv.index("--listen-host") + 1] == "127.0.0.1"
    assert GPU_SPEC.target == CPU_SPEC.target
    assert GPU_SPEC.target.output_tokens_counter == (("llamacpp:tokens_predicted_total", "exllamav3:new_tokens_total"), 5)


def test_gpu_and_cpu_services_pass_only_flags_server_py_parses() -> None:
    known = _server_py_flags()
    for engine in (TEXTGEN_GPU, TEXTGEN_CPU):
        given = {arg for arg in engine.args if arg.startswith("--")}
        given |= {part for template in engine.flags.values() for part in template if part.startswith("--")}
        assert given <= known, f"{engine.slug}: {sorted(given - known)} not in server.py's flags"


@pytest.mark.parametrize("setting", ["DTYPE", "QUANTIZE", "MAX_TOTAL_TOKENS", "MAX_INPUT_TOKENS",
                                     "MAX_BATCH_PREFILL_TOKENS", "SHARDS", "GPU_MEMORY_FRACTION",
                                     "SERVED_MODEL_NAME"])
def test_gpu_service_refuses_what_its_loader_has_no_flag_for_with_the_reason(setting: str) -> None:
    reason = TEXTGEN_GPU.refused[setting]
    assert "loader-independent" not in reason
    with pytest.raises(SettingError, match=rf"^textgen does not support {setting} \(TEXTGEN_{setting}\): "):
        translate("textgen", {setting: "1"})
