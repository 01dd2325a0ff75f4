"""Hosted endpoints: a 429 waits as Retry-After says and is sent again (no engine failure), the
key comes from the environment and is written nowhere, and a spend cap refuses a run of more
requests than it allows. The hosted endpoint is tests/fault_proxy.py in front of the real
embedded engine: it answers 429 with Retry-After, counts what arrived and checks the key."""

from __future__ import annotations

import csv
import json
import urllib.request
from pathlib import Path

import pytest

from loadtest.client.transport import RATE_LIMIT_TRIES, _retry_after_s
from rig_helpers import run_locust, running_fault_proxy

_KEY = "sk-MARKERhosted0123456789"


def _row_and_records(out: Path) -> tuple[dict[str, str], list[dict]]:
    with open(out / "runs.csv", newline="") as file:
        [row] = list(csv.DictReader(file))
    lines = (out / "runs" / row["run_id"] / "requests.jsonl").read_text().splitlines()
    return row, [json.loads(line) for line in lines]


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def _served_model(engine_url: str) -> str:
    return _get_json(engine_url + "/v1/models")["data"][0]["id"]


def test_a_429_waits_for_retry_after_and_is_sent_again(engine_url: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", _KEY)
    with running_fault_proxy(engine_url, "--faults", "http429,ok",
                             "--key-env", "OPENAI_API_KEY") as url:
        result = run_locust("--engine", "openai", "--host", url, "--model", _served_model(engine_url),
                            "--users", "1", "--requests", "3", "--max-tokens", "8",
                            "--ignore-eos", "--telemetry-interval", "0", "--out", str(tmp_path))
        counts = _get_json(url + "/fault-proxy/counts")
    assert result.returncode == 0, result.stderr[-3000:]  # rate limited is not failed
    row, records = _row_and_records(tmp_path)
    assert counts == {"requests": 6, "429": 3}  # each request refused once, then let through
    assert all(r["error_kind"] is None and r["rate_limited"] == 1 for r in records)
    assert all(r["rate_limited_wait_ns"] >= 1e9 for r in records)  # Retry-After: 1
    assert all(r["output_tokens"] == 8 and r["ttft_ms"] < 1000 for r in records)  # times from the send let through
    assert (row["failed"], row["rate_limited"]) == ("0", "3")
    assert float(row["rate_limited_wait_s"]) >= 3 and float(row["completion_time_s"]) >= 3
    assert "rate_limited" in row["warnings"]
    written = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    assert _KEY not in written + result.stdout + result.stderr


def test_a_request_still_refused_after_the_tries_is_recorded_as_rate_limited(
        engine_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", _KEY)
    with running_fault_proxy(engine_url, "--faults", "http429") as url:
        result = run_locust("--engine", "openai", "--host", url, "--model", _served_model(engine_url),
                            "--users", "1", "--requests", "1", "--max-tokens", "8",
                            "--telemetry-interval", "0", "--out", str(tmp_path),
                            timeout_s=120)
        counts = _get_json(url + "/fault-proxy/counts")
    assert result.returncode == 1, result.stderr[-3000:]
    row, [record] = _row_and_records(tmp_path)
    assert counts["429"] == RATE_LIMIT_TRIES
    assert (record["error_kind"], record["http_status"]) == ("rate_limited", 429)
    assert row["errors"] == "rate_limited=1"


def test_a_hosted_engine_needs_its_key_and_caps_its_requests(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    """Refused before anything is sent: the stand-in is never even started."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    no_key = run_locust("--engine", "openai", "--model", "m", "--out", str(tmp_path))
    assert no_key.returncode == 2
    assert no_key.stderr.strip().splitlines()[-1] == (
        "error: --engine openai needs its key in the environment: set OPENAI_API_KEY")
    monkeypatch.setenv("OPENAI_API_KEY", _KEY)
    over = run_locust("--engine", "openai", "--model", "m", "--requests", "101",
                      "--out", str(tmp_path))
    assert over.returncode == 2 and "Traceback" not in over.stderr
    assert over.stderr.strip().splitlines()[-1].startswith(
        "error: --requests 101 is over --max-spend-requests 100 for openai")
    monkeypatch.delenv("HF_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("HF_TOKEN", _KEY)
    no_url = run_locust("--engine", "hf-endpoint", "--out", str(tmp_path))
    assert no_url.stderr.strip().splitlines()[-1] == (
        "error: --engine hf-endpoint needs its base URL: set HF_ENDPOINT_URL or pass --host")
    assert not (tmp_path / "runs.csv").exists()


@pytest.mark.parametrize("value, refusals, seconds", [
    ("2", 1, 2.0), ("0.5", 3, 0.5), (None, 1, 1.0), (None, 3, 4.0), ("soon", 2, 2.0),
    ("Wed, 21 Oct 2015 07:28:00 GMT", 1, 0.0),  # a date in the past: at once
])
def test_retry_after_is_read_as_seconds_or_a_date(value: str | None, refusals: int,
                                                  seconds: float):
    assert _retry_after_s(value, refusals) == seconds
