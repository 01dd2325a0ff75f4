"""TGI's native stream through the whole rig, and the measurer against a known cadence."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rig_helpers import run_locust
from fake_tgi import FakeTGI, served_medians


def test_tgi_native_stream_is_measured_against_the_servers_known_cadence(tmp_path: Path):
    with FakeTGI(prefill_s=0.05, token_s=0.02) as tgi:
        result = run_locust("--engine", "tgi", "--host", tgi.url, "--users", "4",
                            "--requests", "8", "--max-tokens", "10", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    with (tmp_path / "runs.csv").open(newline="") as file:
        [row] = list(csv.DictReader(file))
    assert (row["engine"], row["model"], row["api"]) == ("tgi", "fake/tgi-model", "generate")
    assert (row["completed"], row["output_tokens"], row["output_tokens_source"]) == (
        "8", "80", "details")
    # The server waits 50 ms, then sends a token every 20 ms: the rig must see what it did. Its
    # sleeps overshoot on a loaded host, so the check is against what it recorded; the rig's
    # clock starts before the server reads the request, so it may see up to 10 ms more, and more
    # again where this loaded host kept the server's thread from reading it (seen: 100 ms), which
    # the server's own read times say (one monotonic clock for both processes).
    assert len(tgi.served) == 8 and min(s.events_s[0] for s in tgi.served) >= 0.05
    served = served_medians(tgi.served)
    [requests] = (tmp_path / "runs").glob("*/requests.jsonl")
    records = [json.loads(line) for line in requests.read_text().splitlines()]
    read_late_ms = max(0.0, max(1000 * s.received_s - r["sent_ns"] / 1e6 for s, r in zip(
        sorted(tgi.served, key=lambda s: s.received_s), sorted(records, key=lambda r: r["sent_ns"]))))
    for column in ("ttft_p50_ms", "e2e_p50_ms"):
        assert -0.01 <= float(row[column]) - served[column] <= 10 + read_late_ms, (
            column, row[column], served, read_late_ms)
    assert float(row["itl_p50_ms"]) == pytest.approx(served["itl_p50_ms"], abs=2)
    for record in records:
        assert record["finish_reason"] == "length" and len(record["chunk_gaps_ns"]) == 9


def test_every_user_is_connected_before_the_first_request_leaves(tmp_path: Path):
    """Connection set-up is never inside a measured request, and the first wave leaves together.
    (Users that connected inside their first request, through gevent's threaded resolver, once
    spread the first wave's arrival at a 2-core engine over ~800 ms and skewed its TTFT.)"""
    with FakeTGI(prefill_s=0.0, token_s=0.0, count_connections=True) as tgi:
        result = run_locust("--engine", "tgi", "--host", tgi.url, "--users", "16",
                            "--spawn-rate", "8", "--requests", "32", "--max-tokens", "2",
                            "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    assert tgi.connected_at_first_post == 16
    # Users spawn over 2 s and connect as they spawn, so the first ones wait, connected, for
    # the last: connecting inside the first request would leave no connection idle first.
    assert len(tgi.idle_before_first_request) == 16
    assert max(tgi.idle_before_first_request.values()) > 1.0
