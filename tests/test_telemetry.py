"""loadtest.telemetry: metric parsing and mapping, summaries, and the sampler process for real."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import pytest
from rig_helpers import REPO, run_locust, wait_for

from loadtest.local_engine import started_engine_at
from loadtest.telemetry import (
    gpu_selection,
    per_token_columns,
    start_telemetry,
    summarize_telemetry,
)
from loadtest.telemetry.engine import (
    engine_sample,
    merged_samples,
    metric_names_for,
    parse_prometheus,
    scrape,
)

_TEXT = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
vllm:num_requests_waiting{engine="0",model_name="m"} 7.0
vllm:num_requests_waiting_by_reason{engine="0",reason="capacity"} 99.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5
vllm:request_queue_time_seconds_sum{engine="0",model_name="m"} 1.5
vllm:request_queue_time_seconds_count{engine="0",model_name="m"} 10.0
tgi_batch_current_size 4
tgi_queue_size 12 1700000000000
tgi_request_queue_duration_sum 0.75
tgi_request_queue_duration_count 3
sglang:num_running_reqs{model_name="a b {c}"} 6
sglang:num_queue_reqs{model_name="a b {c}"} 1
sglang:token_usage{model_name="a b {c}"} 0.125
llamacpp:requests_processing 2
llamacpp:requests_deferred 5
llamacpp:kv_cache_usage_ratio 0.75
"""


def test_vllm_gauges_are_summed_and_kv_cache_is_the_fullest_rank():
    row = engine_sample(parse_prometheus(_TEXT), metric_names_for("vllm-cpu"))
    assert row == {"running": 5.0, "waiting": 7.0, "kv_cache_pct": 50.0,
                   "queue_time_sum_s": 1.5, "queue_time_count": 10.0}


@pytest.mark.parametrize("engine, expected", [
    ("tgi", {"running": 4.0, "waiting": 12.0, "queue_time_sum_s": 0.75, "queue_time_count": 3.0}),
    ("sglang", {"running": 6.0, "waiting": 1.0, "kv_cache_pct": 12.5}),
    ("llamacpp", {"running": 2.0, "waiting": 5.0, "kv_cache_pct": 75.0}),
])
def test_each_engine_maps_to_the_same_fields(engine: str, expected: dict[str, float]):
    assert engine_sample(parse_prometheus(_TEXT), metric_names_for(engine)) == expected


def test_replicas_behind_a_balancer_read_as_one_engine():
    """Two llama-servers' /metrics: requests add up, KV cache is the fullest replica's."""
    first = "llamacpp:requests_processing 2\nllamacpp:requests_deferred 5\nllamacpp:kv_cache_usage_ratio 0.75\n"
    second = "llamacpp:requests_processing 3\nllamacpp:requests_deferred 0\nllamacpp:kv_cache_usage_ratio 0.5\n"
    row = engine_sample(merged_samples([first, second]), metric_names_for("llamacpp"))
    assert row == {"running": 5.0, "waiting": 5.0, "kv_cache_pct": 75.0}


def test_older_vllm_cache_name_is_read():
    text = "vllm:gpu_cache_usage_perc 0.5\n"
    assert engine_sample(parse_prometheus(text), metric_names_for("vllm")) == {"kv_cache_pct": 50.0}


def test_engine_without_metrics_has_no_names():
    assert metric_names_for("textgen-webui") is None


def test_gpu_selection_follows_gpu_option_then_host():
    assert gpu_selection("0,1", "http://gpu-box:8000") == "0,1"
    assert gpu_selection(" 2 ", "http://127.0.0.1:8000") == "2"
    assert gpu_selection("H100", "http://localhost:8000") == "all"
    assert gpu_selection("", "http://[::1]:8000") == "all"
    assert gpu_selection("H100", "http://gpu-box:8000") == "none"


def _gpu(t: float, index: int, **fields: float) -> dict[str, float | str]:
    return {"t": t, "source": "gpu", "gpu": index, "util_pct": 50.0, **fields}


def test_summary_energy_counter_memory_peak_and_queue_time():
    samples = [
        _gpu(0.0, 0, mem_used_mib=1000, power_w=100, energy_mj=5_000_000),
        _gpu(0.0, 1, mem_used_mib=500, power_w=200, energy_mj=1_000_000),
        _gpu(2.0, 0, mem_used_mib=3000, power_w=300, energy_mj=5_400_000),
        _gpu(2.0, 1, mem_used_mib=100, power_w=200, energy_mj=1_400_000),
        {"t": 0.0, "source": "engine", "running": 1, "waiting": 0, "queue_time_sum_s": 1.0,
         "queue_time_count": 10},
        {"t": 2.0, "source": "engine", "running": 4, "waiting": 9, "queue_time_sum_s": 3.0,
         "queue_time_count": 20},
        {"t": 4.0, "source": "engine", "running": 12, "waiting": 0},
    ]
    row = summarize_telemetry(samples, {"gpu": "sampled", "engine": "sampled"})
    assert row["gpu_count"] == 2
    assert row["gpu_mem_peak_mib"] == 3100  # the highest total at one time, not a sum of peaks
    assert row["gpu_util_mean_pct"] == 50.0
    assert row["gpu_power_mean_w"] == 400.0
    assert row["gpu_energy_j"] == pytest.approx(800.0)  # (400 + 400) J from the counters
    assert row["gpu_energy_source"] == "nvml_energy_counter"
    assert (row["engine_running_peak"], row["engine_waiting_peak"]) == (12, 9)
    assert row["engine_held_peak"] == 13  # at one scrape (4 + 9), not the sum of the peaks
    assert row["engine_queue_time_mean_ms"] == pytest.approx(200.0)  # 2 s over 10 requests


def _engine(t: float, **fields: float) -> dict[str, float | str]:
    return {"t": t, "source": "engine", "running": 1, **fields}


@pytest.mark.parametrize("samples, expected", [
    # vLLM: hits and queries, running totals in prompt tokens: the run's share is their change
    ([_engine(0, prefix_hit_tokens=100, prefix_query_tokens=1000),
      _engine(1, prefix_hit_tokens=400, prefix_query_tokens=1500),
      _engine(2, prefix_hit_tokens=700, prefix_query_tokens=2000)],
     {"engine_prefix_cache_hit_tokens": 600, "engine_prefix_cache_query_tokens": 1000,
      "engine_prefix_cache_hit_pct": 60.0}),
    # llama.cpp counts the prompt tokens it processed (misses): lookups are hits + misses
    ([_engine(0, prefix_hit_tokens=0, prefix_miss_tokens=50),
      _engine(2, prefix_hit_tokens=300, prefix_miss_tokens=150)],
     {"engine_prefix_cache_hit_tokens": 300, "engine_prefix_cache_query_tokens": 400,
      "engine_prefix_cache_hit_pct": 75.0}),
    # SGLang: only a recent rate, a fraction: its mean over the window
    ([_engine(0, prefix_hit_rate=0.25), _engine(1, prefix_hit_rate=0.75)],
     {"engine_prefix_cache_hit_pct": 50.0}),
    # no lookups during the run: counts, but no ratio
    ([_engine(0, prefix_hit_tokens=5, prefix_query_tokens=9),
      _engine(1, prefix_hit_tokens=5, prefix_query_tokens=9)],
     {"engine_prefix_cache_hit_tokens": 0, "engine_prefix_cache_query_tokens": 0}),
    # one scrape only: no change to speak of
    ([_engine(0, prefix_hit_tokens=5, prefix_query_tokens=9)], {}),
])
def test_prefix_cache_hits_are_the_runs_own(samples: list[dict], expected: dict[str, float]):
    row = summarize_telemetry(samples, {"gpu": "absent", "engine": "sampled"})
    assert {k: v for k, v in row.items() if k.startswith("engine_prefix")} == expected


def test_vllm_prefix_cache_counters_are_read():
    text = ('vllm:prefix_cache_queries_total{engine="0",model_name="m"} 2048.0\n'
            'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 1024.0\n')
    assert engine_sample(parse_prometheus(text), metric_names_for("vllm-cpu")) == {
        "prefix_hit_tokens": 1024.0, "prefix_query_tokens": 2048.0}


def test_speculation_acceptance_is_the_runs_own():
    """vLLM's and Aphrodite's running totals of draft tokens proposed and accepted, as they
    read on /metrics (summed over engines), become the run's share and their ratio."""
    before = ('aphrodite:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 1000.0\n'
              'aphrodite:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 300.0\n')
    after = ('aphrodite:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 1600.0\n'
             'aphrodite:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 450.0\n')
    names = metric_names_for("aphrodite")
    samples = [_engine(t, **engine_sample(parse_prometheus(text), names))
               for t, text in ((0, before), (2, after))]
    row = summarize_telemetry(samples, {"gpu": "absent", "engine": "sampled"})
    assert {k: v for k, v in row.items() if k.startswith("engine_spec")} == {
        "engine_spec_drafted_tokens": 600, "engine_spec_accepted_tokens": 150,
        "engine_spec_accept_pct": 25.0}
    no_speculation = summarize_telemetry([_engine(0), _engine(1)], {"gpu": "absent", "engine": "sampled"})
    assert not [k for k in no_speculation if k.startswith("engine_spec")]


def test_summary_integrates_power_without_a_counter():
    samples = [_gpu(0.0, 0, mem_used_mib=1, power_w=100), _gpu(1.0, 0, mem_used_mib=1, power_w=300),
               _gpu(3.0, 0, mem_used_mib=1, power_w=300)]
    row = summarize_telemetry(samples, {"gpu": "sampled", "engine": "absent"})
    assert row["gpu_energy_j"] == pytest.approx(200 + 600)
    assert row["gpu_energy_source"] == "power_integral"


def _lines(run_dir: Path, source: str) -> int:
    """How many samples from `source` the sampler has written so far."""
    path = run_dir / "telemetry.jsonl"
    text = path.read_text() if path.exists() else ""
    return sum(json.loads(line)["source"] == source for line in text.splitlines()
               if line.endswith("}"))


def _up_for(run_dir: Path, seconds: float) -> Callable[[], bool]:
    """True once the sampler has been up (its first line written) for `seconds`."""
    up: list[float] = []

    def ready() -> bool:
        if not up and _lines(run_dir, "sampler"):
            up.append(time.monotonic())
        return bool(up) and time.monotonic() - up[0] >= seconds
    return ready


def _sample(args: list[str], until: Callable[[], bool]) -> tuple[subprocess.CompletedProcess[str],
                                                                  float]:
    """The sampler, sent SIGTERM once `until()` holds (not after a guessed sleep)."""
    process = subprocess.Popen([sys.executable, "-m", "loadtest.telemetry", *args], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(until, "the sampler's samples", timeout_s=60)
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=10)
    stopped_s = time.monotonic() - sent
    return subprocess.CompletedProcess(process.args, process.returncode, out, err), stopped_s


@pytest.mark.engine
def test_sampler_scrapes_the_real_engine_until_sigterm(engine_url: str, tmp_path: Path):
    real = parse_prometheus(scrape(engine_url))
    fields = engine_sample(real, metric_names_for("vllm-cpu"))
    assert set(fields) == {"running", "waiting", "kv_cache_pct", "queue_time_sum_s",
                           "queue_time_count", "ttft_sum_s", "ttft_count", "e2e_sum_s",
                           "e2e_count", "prefix_hit_tokens", "prefix_query_tokens"}
    done, stopped_s = _sample(["--run-dir", str(tmp_path), "--engine", "vllm-cpu", "--url",
                               engine_url, "--interval", "0.2"],
                              until=lambda: _lines(tmp_path, "engine") >= 5)
    assert done.returncode == 0, done.stderr
    assert stopped_s < 2
    lines = [json.loads(x) for x in (tmp_path / "telemetry.jsonl").read_text().splitlines()]
    engine = [x for x in lines if x["source"] == "engine"]
    assert len(engine) >= 5
    assert all(b["t"] > a["t"] for a, b in pairwise(engine))
    summary = json.loads((tmp_path / "telemetry_summary.json").read_text())
    assert summary["telemetry_engine"] == "sampled"
    assert summary["engine_running_peak"] >= 0 and 0 <= summary["engine_kv_cache_peak_pct"] <= 100
    if summary["telemetry_gpu"] == "absent":  # this machine: no GPU, said so, no error
        assert any(note.startswith("gpu:") for note in summary["telemetry_notes"])
        assert not any(x["source"] == "gpu" for x in lines)


def test_sampler_with_no_engine_and_no_gpu_is_not_an_error(tmp_path: Path):
    done, _ = _sample(["--run-dir", str(tmp_path), "--engine", "vllm", "--url",
                       "http://127.0.0.1:9", "--gpus", "none", "--interval", "0.1"],
                      until=_up_for(tmp_path, 0.5))  # its third failed scrape at 0.2 s
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "telemetry_summary.json").read_text())
    assert summary["telemetry_gpu"] == "not_sampled"
    assert summary["telemetry_engine"] == "absent"
    assert any("no metrics at http://127.0.0.1:9/metrics" in n for n in summary["telemetry_notes"])


def test_hook_returns_row_columns_for_a_remote_engine(tmp_path: Path):
    telemetry = start_telemetry(tmp_path, "textgen-webui", "http://gpu-box:5000", "H100",
                                interval_s=0.1)
    time.sleep(0.8)
    row = telemetry.stop(output_tokens=100)
    assert row["telemetry_gpu"] == "not_sampled" and row["telemetry_engine"] == "absent"
    assert "telemetry_notes" not in row
    assert (tmp_path / "telemetry.jsonl").exists()


def test_energy_per_output_token():
    assert per_token_columns({"gpu_energy_j": 50.0}, 200) == {"gpu_j_per_output_token": 0.25}
    assert per_token_columns({"gpu_energy_j": 50.0}, 0) == {}
    assert per_token_columns({}, 200) == {}


def test_summary_of_real_h200_samples():
    """Samples the sampler took on an H200 (2026-11-22) around 6 s of bf16 matmuls with a
    16 GiB allocation (loadtest/telemetry/gpu_proof.py); NVML v1 memory, so ~615 MiB idle."""
    path = Path(__file__).parent / "data" / "telemetry_h200_matmul.jsonl"
    samples = [json.loads(line) for line in path.read_text().splitlines()]
    row = summarize_telemetry(samples, {"gpu": "sampled", "engine": "absent"})
    gpu = [s for s in samples if s["source"] == "gpu"]
    assert row["gpu_count"] == 1 and len(gpu) == 66
    assert 16 * 1024 < row["gpu_mem_peak_mib"] < 19 * 1024
    assert max(s["util_pct"] for s in gpu) == 100 and min(s["util_pct"] for s in gpu) == 0
    assert row["gpu_energy_source"] == "nvml_energy_counter"
    assert row["gpu_energy_j"] == pytest.approx((gpu[-1]["energy_mj"] - gpu[0]["energy_mj"]) / 1e3)
    integral = summarize_telemetry([{k: v for k, v in s.items() if k != "energy_mj"}
                                    for s in samples], {"gpu": "sampled", "engine": "absent"})
    assert integral["gpu_energy_source"] == "power_integral"
    assert integral["gpu_energy_j"] == pytest.approx(row["gpu_energy_j"], rel=0.02)


@pytest.mark.engine
def test_run_row_says_what_was_done_to_the_prefix_cache_and_counts_its_hits(engine_url: str,
                                                                              tmp_path: Path):
    """One long prompt sent 8 times: after the first, vLLM finds its whole blocks (128 tokens)
    cached, and the row reads those hits from the engine's counters over this run alone; an
    engine the rig started here also has its busiest process's CPU."""
    prompts = tmp_path / "same.jsonl"
    long = " ".join(f"word{i}" for i in range(400))
    prompts.write_text(json.dumps({"id": "same", "prompt": long}) + "\n")
    out = tmp_path / "out"
    result = run_locust("--engine", "vllm-cpu", "--host", engine_url, "--users", "1",
                        "--requests", "8", "--max-tokens", "4", "--prompts", str(prompts),
                        "--telemetry-interval", "0.2", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    run = json.loads(next((out / "runs").glob("*/run.json")).read_text())
    # the session's engine is this repo's recipe (dev mode: reset) or one given by RIG_ENGINE_URL
    assert run["prefix_cache_reset"] in ("reset: POST /reset_prefix_cache", "none: vLLM serves "
                                         "/reset_prefix_cache only with VLLM_SERVER_DEV_MODE=1")
    assert run["client_pinned_by"].split(":")[0] in ("none", "rig", "apart", "shared")
    assert run["engine_prefix_cache_hit_tokens"] >= 7 * 128  # each repeat: at least one block
    assert 0 < run["engine_prefix_cache_hit_pct"] < 100  # the first lookup missed
    if started_engine_at(engine_url) is not None:  # the rig started it here: its processes' CPU
        assert run["engine_process_cpu_max_pct"] > 0 and run["engine_process_cpu_max_name"]
        assert run["engine_processes"][0]["name"] == run["engine_process_cpu_max_name"]
        assert 0 < run["engine_front_end_cpu_max_pct"] <= run["engine_process_cpu_max_pct"]
