"""rig reconcile (loadtest/reconcile/): each peer definition recomputed from small request records
built here, whose every timestamp is known, so each figure is checked to the nanosecond; the
table's causes; bad input in one line. rig peers run: its plan (warm-ups first, pairs
alternating) and its pinning (both clients beside an engine the rig started, in fresh
processes). Two engine tests run the peers themselves on llama.cpp."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loadtest.cpus import default_layout, format_cpus
from loadtest.reconcile import DEFINITIONS, aiperf, guidellm, llmperf, mlperf, rig, vllm
from loadtest.reconcile.figures import linear, nearest_rank
from loadtest.reconcile.peers import PeerError, peer_program, read_peer_result
from loadtest.reconcile.run import read_run
from loadtest.reconcile.side_by_side import plan
from loadtest.results.files import RecordWriter
from loadtest.results.record import RequestRecord

REPO = Path(__file__).resolve().parents[1]
MS = 1_000_000  # ns


def record(request_id: int, sent_ms: int, first_ms: int, gaps_ms: list[int], done_ms: int,
           tokens: int, **extra) -> RequestRecord:
    return RequestRecord(request_id=request_id, prompt_id="p", sent_at=0.0, sent_ns=sent_ms * MS,
                         first_chunk_ns=first_ms * MS, chunk_gaps_ns=[g * MS for g in gaps_ms],
                         done_ns=done_ms * MS, output_chunks=len(gaps_ms) + 1,
                         output_tokens=tokens, output_tokens_source="usage", **extra)


# Two requests: sent at 0 and 10 ms; first chunks at 100 and 50 ms; 4 and 2 chunks; the
# streams end 5 ms after their last chunk ([DONE] and the close).
RECORDS = [record(0, 0, 100, [10, 20, 30], 165, 4),
           record(1, 10, 50, [40], 95, 2)]


def write_run(folder: Path, records: list[RequestRecord], meta: dict | None = None) -> Path:
    writer = RecordWriter(folder / "requests.jsonl", "r1")
    for r in records:
        writer.write(r)
    writer.close()
    (folder / "run.json").write_text(json.dumps(meta or {"api": "completions"}))
    return folder


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_run(tmp_path, RECORDS)


def values(module, run_dir: Path) -> dict[str, float | None]:
    return {k: f.value for k, f in module.figures(read_run(run_dir)).items()}


def test_the_rig_column_is_the_rigs_own_summary(run_dir: Path):
    got = values(rig, run_dir)
    assert got["ttft_mean_ms"] == pytest.approx((100 + 40) / 2)
    assert got["e2e_mean_ms"] == pytest.approx((165 + 85) / 2)  # to the stream's end
    assert got["duration_s"] == pytest.approx(0.165)
    assert got["output_tok_per_s"] == pytest.approx(6 / 0.165)
    assert got["completed"] == 2 and got["failed"] == 0


def test_vllm_ends_latency_at_the_last_token_chunk_and_pools_gaps(run_dir: Path):
    got = values(vllm, run_dir)
    assert got["e2e_mean_ms"] == pytest.approx((160 + 80) / 2)  # not 165 and 85
    assert got["itl_mean_ms"] == pytest.approx((10 + 20 + 30 + 40) / 4)
    # per request (latency - TTFT) / (tokens - 1): (160-100)/3 and (80-40)/1
    assert got["tpot_mean_ms"] == pytest.approx((20 + 40) / 2)
    assert got["output_tok_per_s"] == pytest.approx(6 / 0.165)


def test_aiperf_itl_is_per_request_and_its_duration_ends_at_the_last_content(run_dir: Path):
    got = values(aiperf, run_dir)
    assert got["itl_mean_ms"] == pytest.approx(30)  # (20 + 40) / 2, not the pooled 25
    assert got["duration_s"] == pytest.approx(0.160)  # sent 0 -> last chunk at 160
    assert got["req_per_s"] == pytest.approx(2 / 0.160)


def test_guidellm_tpot_includes_the_ttft_and_percentiles_take_the_nearest_rank(run_dir: Path):
    got = values(guidellm, run_dir)
    assert got["tpot_mean_ms"] == pytest.approx((160 / 4 + 80 / 2) / 2)
    assert got["itl_mean_ms"] == pytest.approx((60 / 3 + 40 / 1) / 2)
    assert got["ttft_p50_ms"] == 40  # nearest rank of (40, 100); numpy would give 70


def test_llmperf_divides_the_whole_stream_by_the_lines_read(run_dir: Path, tmp_path: Path):
    got = values(llmperf, run_dir)
    assert got["itl_mean_ms"] == pytest.approx((160 / 4 + 80 / 2) / 2)
    assert got["output_tokens"] == 6 + 2  # encode() adds a BOS to each answer
    chat = write_run(tmp_path / "chat", RECORDS, {"api": "chat"})  # + the role announcement
    assert values(llmperf, chat)["itl_mean_ms"] == pytest.approx((160 / 5 + 80 / 3) / 2)


def test_mlperf_counts_from_the_schedule_and_takes_floor_ranks(tmp_path: Path):
    late = [record(0, 0, 100, [10], 120, 2, scheduled_ns=-50 * MS),
            record(1, 0, 60, [10], 80, 2, scheduled_ns=0)]
    got = values(mlperf, write_run(tmp_path, late))
    assert got["ttft_mean_ms"] == pytest.approx((150 + 60) / 2)  # from the scheduled time
    assert got["ttft_p50_ms"] == 150  # sorted[int(2 x 0.5)]
    # the test starts at the first schedule (-50 ms); the last issued sample is done at 80 ms
    assert got["duration_s"] == pytest.approx(0.130)
    assert got["req_per_s"] == pytest.approx(1 / 0.130)  # (samples - 1) / span
    assert "itl_mean_ms" not in got  # LoadGen has no ITL


def ns_record(request_id: int, sent_ns: int, ttft_ns: int, latency_ns: int,
              tokens: int) -> RequestRecord:
    return RequestRecord(request_id=request_id, prompt_id="p", sent_at=0.0, sent_ns=sent_ns,
                         first_chunk_ns=sent_ns + ttft_ns, chunk_gaps_ns=[],
                         done_ns=sent_ns + latency_ns, output_chunks=max(tokens, 1),
                         output_tokens=tokens, output_tokens_source="usage")


def test_mlperf_tpot_is_loadgens_int64_arithmetic(tmp_path: Path):
    """logging.cc RecordSampleCompletion and results.cc ProcessTokenLatencies at b66003e1:
    per sample (latency - TTFT) / (n_tokens - 1) in int64 (truncated toward zero), a count
    below 2 kept as 0 (TPOT / -1, negative; its tokens not counted), the mean sum / n in
    int64, percentiles sorted[int(n x p)]."""
    samples = [ns_record(0, 0, 1_000_000, 1_000_010, 4),    # 10 / 3 -> 3 ns
               ns_record(1, 5, 2_000_000, 2_000_009, 3),    # 9 / 2 -> 4 ns
               ns_record(2, 10, 500_000, 501_001, 1)]       # 1 token: 1001 / -1 -> -1001 ns
    got = values(mlperf, write_run(tmp_path, samples))
    assert got["tpot_mean_ms"] == -331 / 1e6  # -994 / 3 truncated toward zero, not -332
    assert got["tpot_p50_ms"] == 3 / 1e6  # sorted [-1001, 3, 4][int(1.5)]
    assert got["tpot_p99_ms"] == 4 / 1e6  # [int(2.97)]
    assert got["ttft_mean_ms"] == 1_166_666 / 1e6  # 3,500,000 / 3 truncated
    assert got["output_tokens"] == 7  # the 1-token sample counts 0
    span_s = 501_011 / 1e9  # start -> the last issued sample (sent at 10 ns) done
    assert got["duration_s"] == pytest.approx(span_s)
    assert got["output_tok_per_s"] == pytest.approx(7 / span_s)
    how = mlperf.figures(read_run(tmp_path))["tpot_mean_ms"].how
    assert "1 sample(s) of fewer than 2 tokens" in how


def test_mlperf_throughput_ends_at_the_last_issued_sample_not_the_latest(tmp_path: Path):
    samples = [record(0, 0, 50, [10], 200, 2), record(1, 10, 40, [10], 100, 2)]
    got = values(mlperf, write_run(tmp_path, samples))
    assert got["duration_s"] == pytest.approx(0.100)  # not 0.200
    assert got["req_per_s"] == pytest.approx(1 / 0.100)


def test_percentile_methods_differ_as_the_peers_do():
    data = list(range(1, 11))
    assert linear(data, 99) == pytest.approx(9.91)
    assert nearest_rank(data, 99) == 10 and nearest_rank(data, 50) == 5


def test_every_definition_cites_its_source():
    for name, module in DEFINITIONS.items():
        assert module.NAME == name
        assert any(c.isdigit() for c in module.SOURCE), module.SOURCE  # a version or a commit
        assert "Follows" in module.__doc__


def rig_cmd(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadtest.cli.main", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def test_the_table_names_the_cause_of_each_difference(run_dir: Path):
    done = rig_cmd("reconcile", str(run_dir))
    assert done.returncode == 0, done.stderr
    e2e = next(line for line in done.stdout.splitlines() if line.startswith("E2E mean"))
    assert e2e.split()[3:5] == ["125.0", "120.0"]  # rig, vllm
    assert "vllm: ends at the last token chunk" in done.stdout
    assert "mlcommons/inference b66003e1" in done.stdout


def test_csv_and_json_carry_every_value(run_dir: Path):
    rows = json.loads(rig_cmd("reconcile", str(run_dir), "--format", "json").stdout)["rows"]
    e2e = next(r for r in rows if r["metric"] == "e2e_mean_ms")
    assert e2e["rig"] == pytest.approx(125) and e2e["vllm"] == pytest.approx(120)
    text = rig_cmd("reconcile", str(run_dir), "--peers", "aiperf", "--format", "csv").stdout
    assert text.splitlines()[0] == "metric,rig,aiperf,cause"


def test_a_peer_result_gets_its_own_column(run_dir: Path, tmp_path: Path):
    result = tmp_path / "vllm.json"
    result.write_text(json.dumps({
        "completed": 2, "failed": 0, "total_output_tokens": 6, "duration": 0.2,
        "output_throughput": 30.0, "request_throughput": 10.0,
        **{f"{s}_{m}_ms": 1.0 for s in ("mean", "p50", "p99")
           for m in ("ttft", "itl", "tpot", "e2el")}}))
    done = rig_cmd("reconcile", str(run_dir), "--peers", "vllm", "--peer-result", f"vllm={result}")
    assert done.returncode == 0, done.stderr
    assert "vllm (own)" in done.stdout.splitlines()[0]


@pytest.mark.parametrize("setup, message", [
    (lambda d: None, "has no per-request records (requests.jsonl)"),
    (lambda d: (d / "requests.jsonl").write_text(""), "holds no request record"),
    (lambda d: (d / "requests.jsonl").write_text('{"a": 1}\n'), "is not a requests.jsonl"),
    (lambda d: write_run(d, [RequestRecord(0, "p", 0.0, 0).fail("connect", "refused")]),
     "no request completed"),
])
def test_a_folder_without_usable_records_is_refused_in_one_line(tmp_path: Path, setup, message):
    setup(tmp_path)
    done = rig_cmd("reconcile", str(tmp_path))
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


def test_a_peer_not_installed_names_how_to_install_it(tmp_path: Path):
    with pytest.raises(PeerError, match=r"install it with scripts/install_peers.sh aiperf"):
        peer_program("aiperf", root=tmp_path)


@pytest.mark.parametrize("peer, content, message", [
    ("vllm", {"completed": 1}, "format changed, no field failed"),
    ("vllm", {"completed": "x"}, "field completed is 'x', not a number"),
    ("aiperf", {"time_to_first_token": {"unit": "s", "avg": 1}}, "time_to_first_token is in 's'"),
    ("guidellm", {"benchmarks": []}, "no field benchmarks.0.metrics.request_totals"),
])
def test_a_changed_result_format_is_named_not_a_traceback(tmp_path: Path, peer, content, message):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(content))
    with pytest.raises(PeerError, match=message):
        read_peer_result(peer, path)
    done = rig_cmd("reconcile", str(write_run(tmp_path, RECORDS)), "--peer-result",
                   f"{peer}={path}")
    assert done.returncode == 2 and done.stderr.startswith("error: ") and \
        done.stderr.count("\n") == 1, done.stderr


def test_reconcile_reads_a_real_run_of_the_evidence():
    runs = sorted((REPO / "evidence").glob("*/*/runs/*/requests.jsonl"))
    if not runs:
        pytest.skip("no run with per-request records under evidence/")
    done = rig_cmd("reconcile", str(runs[0].parent))
    assert done.returncode == 0, done.stderr
    assert "output tok/s" in done.stdout


# --- rig peers run: the plan and the pinning ----------------------------------------------

def test_the_warmups_come_first_and_the_pairs_alternate():
    assert plan(3, 1) == [("warmup", 1), ("rig", 1), ("peer", 1), ("peer", 2), ("rig", 2),
                          ("rig", 3), ("peer", 3)]
    assert plan(1, 2) == [("warmup", 1), ("warmup", 2), ("rig", 1), ("peer", 1)]
    assert plan(2, 0) == [("rig", 1), ("peer", 1), ("peer", 2), ("rig", 2)]


@pytest.mark.parametrize("value", ["-1", "x", "1.5", "", "nan", "10000000000"])
def test_a_bad_warmup_count_is_refused_in_one_line(value: str, tmp_path: Path):
    done = rig_cmd("peers", "run", "--warmup-runs", value, "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.startswith("error: --warmup-runs must be a whole number of 0 or more")
    assert done.stderr.count("\n") == 1, done.stderr


# pin_clients in a fresh process, then a child of it (as a rig run or a peer is started): the
# cores each ends up on, with a registry entry (RIG_STATE_DIR) for an engine "started" here
_PIN = """
import json, os, subprocess, sys
from loadtest.reconcile.side_by_side import pin_clients
note = pin_clients(sys.argv[1], sys.argv[2] == "no-pin")
child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                       capture_output=True, text=True, check=True).stdout
print(json.dumps({"note": note, "self": sorted(os.sched_getaffinity(0)),
                  "child": json.loads(child)}))
"""


def pinned(state_dir: Path, port: int, no_pin: bool = False) -> dict:
    done = subprocess.run([sys.executable, "-c", _PIN, f"http://127.0.0.1:{port}",
                           "no-pin" if no_pin else "pin"], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env={**os.environ, "RIG_STATE_DIR": str(state_dir)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def cores() -> list[int]:
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        pytest.skip("pinning apart needs two cores")
    return mine


def register(state_dir: Path, port: int, cpus: str) -> None:
    """A registry entry as LocalEngine writes one; this test's process stands in for its pid."""
    (state_dir / f"{port}.json").write_text(json.dumps(
        {"pid": os.getpid(), "engine": "vllm-cpu", "port": port,
         "url": f"http://127.0.0.1:{port}", "cpus": cpus, "log": "-"}))


def test_beside_an_engine_the_rig_started_both_clients_get_the_cores_it_leaves(
        tmp_path: Path, cores: list[int]):
    register(tmp_path, 18991, format_cpus(cores[1:]))
    got = pinned(tmp_path, 18991)
    assert got["self"] == got["child"] == [cores[0]]
    assert got["note"].startswith(f"the rig and the peer on cores {cores[0]} (rig: beside")


@pytest.mark.parametrize("engine_cpus, no_pin, said", [
    (None, False, "none: no engine the rig started"),   # not in the registry: not ours
    ("", False, "shared: vllm-cpu (pid"),                # ours, on every core
    ("rest", True, "shared: --no-pin"),
])
def test_otherwise_neither_client_is_moved_and_the_note_says_why(
        tmp_path: Path, cores: list[int], engine_cpus, no_pin: bool, said: str):
    if engine_cpus is not None:
        register(tmp_path, 18992, format_cpus(cores[1:]) if engine_cpus == "rest" else "")
    got = pinned(tmp_path, 18992, no_pin)
    assert got["self"] == got["child"] == cores
    assert got["note"].startswith(f"the rig and the peer not pinned ({said}"), got["note"]


# --- the peers themselves, on llama.cpp (tiny model) ----------------------------------------

@pytest.fixture(scope="module")
def llamacpp(tmp_path_factory: pytest.TempPathFactory):
    from loadtest.local_engine import LocalEngine
    from rig_helpers import free_port
    if not (REPO / "build" / "llama.cpp" / "cpu" / "bin" / "llama-server").exists():
        pytest.skip("llama-server not built (scripts/build_llamacpp.sh)")
    log = tmp_path_factory.mktemp("llamacpp") / "engine.log"
    engine_cpus, _ = default_layout()  # as `rig engine start` pins it: the clients move beside
    with LocalEngine(port=free_port(), engine="llamacpp-cpu", log_path=log,
                     cpus=engine_cpus or None) as engine:
        yield engine.url


@pytest.mark.engine
@pytest.mark.parametrize("peer", ["vllm", "aiperf"])
def test_a_peer_runs_beside_the_rig_and_its_own_figures_are_read(llamacpp: str, peer: str,
                                                                  tmp_path: Path):
    try:
        peer_program(peer)
    except PeerError as exc:
        pytest.skip(str(exc))
    done = rig_cmd("peers", "run", "--peer", peer, "--engine", "llamacpp-cpu", "--host", llamacpp,
                   "--users", "2", "--requests", "8", "--max-tokens", "16", "--format", "json",
                   "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    table = json.loads(done.stdout)
    rows = {r["metric"]: r for r in table["rows"]}
    assert rows["completed"]["rig"] == 8
    assert table["sources"]["warm-up"].startswith("1 unmeasured rig run")
    run_dir = next((tmp_path / "rig" / "runs").iterdir())
    if default_layout()[1]:  # two cores or more: the engine is pinned, so both clients are
        client = default_layout()[1]
        assert table["sources"]["clients"].startswith(f"the rig and the peer on cores {client}")
        # the rig's own run found itself already beside the engine (it inherited the cores)
        assert json.loads((run_dir / "run.json").read_text())["client_pinned_by"].startswith(
            "apart:")
    assert len(list((tmp_path / "warmup" / "runs").iterdir())) == 1
    assert not (tmp_path / "warmup" / "runs.csv").exists()  # never a measured row
    assert rows["ttft_mean_ms"][f"{peer} (own)"] > 0
    assert rows["output_tok_per_s"][peer] == pytest.approx(rows["output_tok_per_s"]["rig"],
                                                            rel=0.05)
    again = rig_cmd("reconcile", str(run_dir), "--peer-result", f"{peer}={tmp_path / f'{peer}-1'}")
    assert again.returncode == 0 and f"{peer} (own)" in again.stdout, again.stderr
    shutil.rmtree(tmp_path / "rig", ignore_errors=True)
