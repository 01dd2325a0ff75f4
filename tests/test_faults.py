"""Faults mid-run, against the real embedded engine: each request's outcome is recorded with its
reason, the run goes on, its row counts them, and nothing is torn.

Server errors (5xx bursts, 503 while loading), malformed and truncated
streams (bad JSON, no final chunk, a reset mid-stream), a stream that stalls past the read
timeout and a slow first token are injected by tests/fault_proxy.py between the rig and vLLM.
A 429 is no failure (tests/test_rate_limits.py).
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

from fault_proxy import FAULTS
from rig_helpers import run_locust, running_fault_proxy

# each fault's outcome in the request's record (None: the request succeeds)
EXPECTED_KIND = {"ok": None, "http500": "http_status", "http503": "http_status",
                 "bad_json": "stream_protocol", "no_final": "truncated",
                 "reset": "truncated", "stall": "timeout", "slow_first": None}


def test_every_fault_is_recorded_with_its_reason_and_the_run_goes_on(engine_url: str,
                                                                      tmp_path: Path):
    assert set(EXPECTED_KIND) == set(FAULTS) - {"miscount", "buffer", "http429"}  # judged, not failed
    faults = list(EXPECTED_KIND)
    rounds = 2
    with running_fault_proxy(engine_url, "--faults", ",".join(faults), "--stall-s", "8",
                             "--slow-s", "1.5") as url:
        result = run_locust("--host", url, "--engine", "vllm-cpu", "--out", str(tmp_path),
                            "--users", "3", "--requests", str(rounds * len(faults)),
                            "--max-tokens", "16", "--ignore-eos", "--read-timeout", "3",
                            "--telemetry-interval", "0")
    assert result.returncode == 1, result.stderr[-3000:]  # some requests failed: exit 1
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    with open(tmp_path / "runs.csv", newline="") as file:
        [row] = list(csv.DictReader(file))
    records = [json.loads(line) for line in
               (tmp_path / "runs" / row["run_id"] / "requests.jsonl").read_text().splitlines()]
    assert len(records) == rounds * len(faults)  # every request recorded, each once
    failures = Counter(r["error_kind"] for r in records if r["error_kind"])
    expected = Counter({kind: rounds * n for kind, n in
                        Counter(k for k in EXPECTED_KIND.values() if k).items()})
    assert failures == expected, [(r["error_kind"], r["error"]) for r in records]
    assert int(row["failed"]) == sum(expected.values())
    assert int(row["completed"]) == len(records) - sum(expected.values())
    for kind in expected:
        assert kind in row["errors"]  # the row names what failed
    statuses = Counter(r["http_status"] for r in records if r["error_kind"] == "http_status")
    assert statuses == {500: rounds, 503: rounds}
    assert "failed_requests" in row["warnings"]
    assert row["flawed_requests"] == "0"  # a real engine's answers are sound, even when cut
    assert not any(r.get("engine_flaws") for r in records)
    ok = [r for r in records if r["error_kind"] is None]
    assert all(r["output_tokens"] == 16 for r in ok)
    slow = [r for r in ok if (r["first_chunk_ns"] - r["sent_ns"]) >= 1.5e9]
    assert len(slow) == rounds  # the slow first tokens were measured, not failed
    stalled = [r for r in records if r["error_kind"] == "timeout"]
    assert all(2.5e9 < r["done_ns"] - r["first_chunk_ns"] < 8e9 for r in stalled)


def _verdict_through(engine_url: str, out: Path, *proxy_args: str) -> dict[str, str]:
    with running_fault_proxy(engine_url, *proxy_args) as url:
        result = run_locust("--host", url, "--engine", "vllm-cpu", "--out", str(out),
                            "--users", "2", "--requests", "8", "--max-tokens", "32",
                            "--ignore-eos", "--telemetry-interval", "1")
    assert result.returncode == 0, result.stderr[-3000:]  # every request succeeded
    with open(out / "runs.csv", newline="") as file:
        [row] = list(csv.DictReader(file))
    return row


def test_a_run_held_up_between_engine_and_client_is_invalid_with_the_front_end_reason(
        engine_url: str, tmp_path: Path):
    """Every first token held back 1 s on its way: the engine's own TTFT histogram (its
    /metrics, scraped through the same proxy) says tens of ms, the client a second more, so the
    numbers describe what sits in between, as on a starved host."""
    row = _verdict_through(engine_url, tmp_path, "--faults", "slow_first", "--slow-s", "1.0")
    assert float(row["ttft_mean_ms"]) > 1000 > 250 + float(row["engine_ttft_mean_ms"])
    assert row["verdict"] == "invalid" and "front_end_lag" in row["verdict_reasons"]


def test_answers_that_arrive_whole_make_the_run_invalid(engine_url: str, tmp_path: Path):
    row = _verdict_through(engine_url, tmp_path, "--faults", "buffer")
    assert row["buffered_requests"] == "8"
    assert row["verdict"] == "invalid" and "answers_arrived_whole" in row["verdict_reasons"]
