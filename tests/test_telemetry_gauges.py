"""The engine's request gauges held against what was in flight (loadtest/telemetry/gauges.py).

No GPU engine runs here, so a stand-in /metrics serves Aphrodite 0.21.0's exposition as its own
code writes it: prometheus_client's text for the names, types and labels of
aphrodite/v1/metrics/loggers.py in the aphrodite-engine 0.21.0 wheel (PrometheusStatLogger:
labels model_name and engine; running and waiting gauges; TTFT and end-to-end histograms).
The real sampler scrapes it; the run's row comes from the real hook.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from rig_helpers import wait_for

from loadtest.results.checks import check_run
from loadtest.results.rules import WARNINGS
from loadtest.telemetry import start_telemetry
from loadtest.telemetry.engine import engine_sample, metric_names_for, parse_prometheus
from loadtest.telemetry.gauges import ENGINE_STATES, GAUGES_READ_ZERO, gauges_read_zero


class _Aphrodite:
    """Aphrodite 0.21.0's metrics: running and waiting as the test sets them, and a request
    finishing (its TTFT and end-to-end times observed) at every scrape."""

    def __init__(self, running: int) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]
        self.running = Gauge("aphrodite:num_requests_running", "Number of requests in model "
                             "execution batches.", labels, registry=self.registry).labels("m", "0")
        self.waiting = Gauge("aphrodite:num_requests_waiting", "Number of requests waiting to be "
                             "processed.", labels, registry=self.registry).labels("m", "0")
        Gauge("aphrodite:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
              labels, registry=self.registry).labels("m", "0").set(0.1)
        self.ttft = Histogram("aphrodite:time_to_first_token_seconds", "Histogram of time to "
                              "first token in seconds.", labels, registry=self.registry).labels("m", "0")
        self.e2e = Histogram("aphrodite:e2e_request_latency_seconds", "Histogram of e2e request "
                             "latency in seconds.", labels, registry=self.registry).labels("m", "0")
        self.running.set(running)

    def text(self) -> bytes:
        self.ttft.observe(0.3)
        self.e2e.observe(2.0)
        return generate_latest(self.registry)


@pytest.fixture
def aphrodite() -> Iterator[tuple[str, list[_Aphrodite]]]:
    served: list[_Aphrodite] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = served[0].text()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", served
    server.shutdown()


def _run(tmp_path: Path, url: str) -> dict:
    """The sampler over a run whose one request is in flight for its whole window."""
    telemetry = start_telemetry(tmp_path, "aphrodite", url, "none", interval_s=0.1)
    telemetry.wait_ready()
    sent = time.time()
    wait_for(lambda: (tmp_path / "telemetry.jsonl").read_text().count('"engine"') >= 5,
             "five scrapes of the stand-in", timeout_s=60)
    return telemetry.stop(output_tokens=64, spans=[(sent - 0.01, time.time() + 60)])


def test_aphrodite_0_21_names_read_its_exposition():
    fields = engine_sample(parse_prometheus(_Aphrodite(running=7).text().decode()),
                           metric_names_for("aphrodite"))
    assert (fields["running"], fields["waiting"], fields["kv_cache_pct"]) == (7, 0, 10)
    assert fields["ttft_count"] == 1 and fields["e2e_count"] == 1


def test_gauges_at_zero_while_requests_are_in_flight_are_named_a_failure(tmp_path: Path, aphrodite):
    url, served = aphrodite
    served.append(_Aphrodite(running=0))
    row = _run(tmp_path, url)
    assert row["telemetry_engine"] == GAUGES_READ_ZERO, row
    assert not {"engine_running_peak", "engine_held_peak"} & set(row), row
    assert row["engine_ttft_count"] >= 1  # the counters the gauges are held against are kept
    row["users"] = 128
    assert "engine_gauges_unread" in check_run(row) and "engine_shared" not in check_run(row)
    assert "engine_shared" in WARNINGS["engine_gauges_unread"]


def test_gauges_that_move_are_sampled(tmp_path: Path, aphrodite):
    url, served = aphrodite
    served.append(_Aphrodite(running=5))
    row = _run(tmp_path, url)
    assert row["telemetry_engine"] == "sampled" and row["engine_running_peak"] == 5, row


def _scrape(t: float, running: float = 0, e2e: float = 0) -> dict:
    return {"t": t, "source": "engine", "running": running, "waiting": 0, "e2e_count": e2e}


def test_gauges_are_judged_on_three_busy_scrapes_by_the_rigs_spans_or_the_engines_counters():
    idle = [_scrape(t) for t in range(6)]
    assert not gauges_read_zero(idle, [(0.5, 2.5)])  # two scrapes in flight: one may miss it
    assert gauges_read_zero(idle, [(0.5, 3.5)])
    assert gauges_read_zero(idle, [(0.5, 1.5), (1.5, 2.5), (2.9, 3.1)])
    assert not gauges_read_zero([*idle[:5], _scrape(5, running=1)], [(0, 6)])
    counted = [_scrape(t, e2e=min(t, 3)) for t in range(6)]
    assert gauges_read_zero(counted, []) and not gauges_read_zero(counted[:3], [])
    assert not gauges_read_zero([], [(0, 6)])


def test_every_engine_state_is_documented():
    from loadtest.results.schema import COLUMNS

    text = next(c.meaning for c in COLUMNS if c.name == "telemetry_engine")
    assert all(state in text for state in ENGINE_STATES)
