"""Locust's web UI, driven through its HTTP API as the page does: each Start runs the fixed
workload again as a new run with its own row; the LLM tab, the run's page (/llm) and /metrics
speak of the run going on (loadtest/live/webui.py). tests/test_web_ui_browser.py drives the
page itself in Chromium."""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from loadtest.launch.command import locust_command
from rig_helpers import REPO, free_port, running_pacer, running_web_ui, wait_for


def _rows(out: Path) -> list[dict[str, str]]:
    path = out / "runs.csv"
    if not path.exists():
        return []
    with path.open(newline="") as file:
        return list(csv.DictReader(file))


def test_each_start_in_the_web_ui_is_a_new_complete_run(tmp_path: Path):
    out = tmp_path / "results"
    with running_pacer("--ttft-ms", "5", "--gap-ms", "5") as engine_url:
        port = free_port()
        ui = f"http://127.0.0.1:{port}"
        locust = subprocess.Popen(  # the form below sets the users
            locust_command(host=engine_url, users=2, headless=False, rig_options=[
                "--web-host", "127.0.0.1", "--web-port", str(port), "--engine", "vllm",
                "--model", "pacer", "--requests", "8", "--max-tokens", "8",
                "--telemetry-interval", "0", "--out", str(out)]),
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            def up() -> bool:
                try:
                    urllib.request.urlopen(ui + "/", timeout=1).close()
                    return True
                except OSError:
                    return False

            def state() -> str:
                with urllib.request.urlopen(ui + "/stats/requests", timeout=5) as answer:
                    return json.loads(answer.read())["state"]

            wait_for(up, "the web UI up", timeout_s=30)
            form = urllib.parse.urlencode({"user_count": 2, "spawn_rate": 2,
                                           "host": engine_url}).encode()
            for start in (1, 2):
                with urllib.request.urlopen(ui + "/swarm", data=form, timeout=10) as answer:
                    assert json.loads(answer.read())["success"]
                wait_for(lambda: len(_rows(out)) == start, f"Start {start}'s row", timeout_s=30)
                wait_for(lambda: state() == "stopped", "the run stopped", timeout_s=30)
                live = json.loads(_get(ui + "/llm/live.json"))  # the LLM tab's figures: this run's
                assert (live["run_id"], live["done"]) == (_rows(out)[-1]["run_id"], 8)
        finally:
            locust.terminate()
            log = locust.communicate(timeout=30)[0]
    rows = _rows(out)
    assert len({r["run_id"] for r in rows}) == 2, log[-2000:]
    assert all(r["completed"] == "8" and r["failed"] == "0" for r in rows)


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read()


def _finished(ui: str) -> dict:
    """The run page's figures once the run has finished."""
    wait_for(lambda: json.loads(_get(ui + "/llm/live.json"))["state"] == "finished",
             "the run finished", timeout_s=60)
    return json.loads(_get(ui + "/llm/live.json"))


def _start(ui: str, engine_url: str, users: int = 2) -> None:
    form = urllib.parse.urlencode({"user_count": users, "spawn_rate": users,
                                   "host": engine_url}).encode()
    with urllib.request.urlopen(ui + "/swarm", data=form, timeout=10) as answer:
        assert json.loads(answer.read())["success"]


def test_the_web_ui_speaks_llm_in_its_tab_its_page_and_metrics(tmp_path: Path):
    """The LLM tab's rows ride on Locust's own poll (/stats/requests), the page's JSON and
    /metrics give the same figures, and at the end the verdict and the run's files."""
    from prometheus_client.parser import text_string_to_metric_families

    out = tmp_path / "results"
    with running_pacer("--ttft-ms", "20", "--gap-ms", "5") as engine_url, \
            running_web_ui(engine_url, out, "--requests", "12", "--max-tokens", "8",
                           "--ignore-eos") as ui:
        before = json.loads(_get(ui + "/llm/live.json"))
        assert before["state"] == "ready" and before["run_id"] == ""  # the form not sent
        assert _get(ui + "/metrics") == b""  # no run: no series
        _start(ui, engine_url)
        live = _finished(ui)
        tab = json.loads(_get(ui + "/stats/requests"))["extended_stats"]
        scraped = _get(ui + "/metrics").decode()
        metrics = {m.name: m for m in text_string_to_metric_families(scraped)}
        run_json = json.loads(_get(ui + live["files"]["run.json"]))
        records = _get(ui + live["files"]["requests.jsonl"]).decode().splitlines()
    row = _rows(out)[0]
    assert live["run_id"] == row["run_id"] == run_json["run_id"] and len(records) == 12
    assert (live["done"], live["total"], live["failed"], live["output_tokens"]) == (12, 12, 0, 96)
    assert live["ttft_ms"]["p50"] == pytest.approx(float(row["ttft_p50_ms"]), abs=1e-3)  # rounded
    assert live["itl_ms"]["p99"] == pytest.approx(float(row["itl_p99_ms"]), abs=0.0051)  # bins
    assert live["verdict"]["verdict"] == row["verdict"] == run_json["verdict"]
    values = {r["figure"]: r["value"] for r in tab[0]["data"]}
    assert tab[0]["key"] == "llm" and values["Progress"].startswith("12/12 requests 100%")
    assert values["Output tokens"].startswith("96 tokens | ")
    assert values["TTFT"].startswith("p50 ") and values["Verdict"] == row["verdict"].upper()
    done = metrics["llm_rig_requests_done"].samples[0]
    assert done.value == 12 and done.labels["run_id"] == row["run_id"]
    assert metrics["llm_rig_output_tokens"].samples[0].value == 96
    ttft = {s.labels["quantile"]: s.value for s in metrics["llm_rig_ttft_seconds"].samples}
    assert ttft["0.5"] == pytest.approx(float(row["ttft_p50_ms"]) / 1000, abs=1e-6)
    assert metrics["llm_rig_run_finished"].samples[0].value == 1
    # over time: every token in one interval or another, a TTFT where requests were sent
    timeline = live["timeline"]
    assert sum(p["output_tok_per_s"] * p["width_s"] for p in timeline) == 96
    assert any(p["ttft_p50_ms"] is not None for p in timeline)
    assert sum(p["failed"] for p in timeline) == 0


def test_the_pages_output_rate_is_flat_while_the_server_streams_steadily(tmp_path: Path):
    """Issue 53: 8 users against a server that streams a token every 10 ms, 64-token answers.
    Counted when their requests ended, the page's tok/s drew a saw-tooth (one wave of answers in
    one second, two in the next: 512, 1,024); counted as their chunks arrive, every whole second
    of the run is within 15% of their median, and each token is in one second or another."""
    users, requests, tokens = 8, 96, 64
    out = tmp_path / "results"
    with running_pacer("--ttft-ms", "10", "--gap-ms", "10") as engine_url, \
            running_web_ui(engine_url, out, "--requests", str(requests), "--max-tokens",
                           str(tokens), "--ignore-eos", users=users) as ui:
        _start(ui, engine_url, users=users)
        timeline = _finished(ui)["timeline"]
    whole = timeline[:-1]  # the last second is cut short by the run's end
    rates = [p["output_tok_per_s"] for p in whole]
    median = statistics.median(rates)
    assert len(whole) >= 4 and all(p["width_s"] == 1 and p["settled"] for p in timeline)
    assert all(abs(rate - median) <= 0.15 * median for rate in rates), timeline
    assert sum(p["output_tok_per_s"] for p in timeline) == pytest.approx(requests * tokens)


def test_with_autostart_a_run_nobody_starts_serves_its_metrics(tmp_path: Path):
    """Locust's --autostart: the run starts at once, no form sent, and /metrics is there to
    scrape while it goes and after (docs/web-ui.md: a dashboard's unattended runs)."""
    out = tmp_path / "results"
    with running_pacer("--ttft-ms", "5", "--gap-ms", "5") as engine_url, \
            running_web_ui(engine_url, out, "--autostart", "--requests", "20", "--max-tokens", "8",
                           "--ignore-eos") as ui:
        _finished(ui)
        wait_for(lambda: b"llm_rig_run_finished" in _get(ui + "/metrics"), "the run's last series")
        scraped = _get(ui + "/metrics").decode()
    assert "llm_rig_requests_done_total{" in scraped and " 20.0" in scraped
    assert len(_rows(out)) == 1


def test_with_worker_processes_the_tab_shows_the_masters_merged_records(tmp_path: Path):
    out = tmp_path / "results"
    port = str(free_port())  # not Locust's 5557: other runs on this host may hold it
    with running_pacer("--ttft-ms", "5", "--gap-ms", "5") as engine_url, \
            running_web_ui(engine_url, out, "--requests", "16", "--max-tokens", "8",
                           "--ignore-eos", "--processes", "2", "--master-bind-port", port,
                           "--master-port", port) as ui:
        wait_for(lambda: json.loads(_get(ui + "/stats/requests"))["worker_count"] == 2,
                 "both workers connected", timeout_s=60)
        _start(ui, engine_url)
        live = _finished(ui)
    row = _rows(out)[0]
    assert (live["run_id"], live["done"], live["output_tokens"]) == (row["run_id"], 16, 128)
    assert row["processes"] == "2"
    assert live["ttft_ms"]["p50"] == pytest.approx(float(row["ttft_p50_ms"]), abs=1e-3)


def test_under_a_web_base_path_the_rigs_routes_and_links_follow_it(tmp_path: Path):
    """Locust's --web-base-path moves its own routes; the rig's page, JSON, files, /metrics and
    the tab's rows move with them, and the Download Data tab links to the run's files."""
    import urllib.error

    out = tmp_path / "results"
    base = "/rig/load"
    with running_pacer("--ttft-ms", "5", "--gap-ms", "5") as engine_url, \
            running_web_ui(engine_url, out, "--requests", "6", "--max-tokens", "4",
                           base_path=base + "/") as ui:
        root = ui.removesuffix(base)
        index = _get(ui + "/").decode()
        _start(ui, engine_url)
        live = _finished(ui)
        tab = json.loads(_get(ui + "/stats/requests"))["extended_stats"]
        page = _get(ui + "/llm").decode()
        metrics = _get(ui + "/metrics").decode()
        files = {name: _get(root + href) for name, href in live["files"].items()
                 if name != "report"}  # building it takes seconds: the browser test follows it
        misses = []
        for path in ("/llm", "/llm/live.json", "/metrics", "/llm/files/run.json"):
            try:
                _get(root + path)
            except urllib.error.HTTPError as exc:
                misses.append(exc.code)
    row = _rows(out)[0]
    assert set(live["files"]) == {"run.json", "requests.jsonl", "report"}
    assert all(href.startswith(base + "/llm/") for href in live["files"].values())
    assert json.loads(files["run.json"])["run_id"] == row["run_id"]
    assert len(files["requests.jsonl"].splitlines()) == 6
    assert tab[0]["key"] == "llm" and any(r["figure"] == "Verdict" for r in tab[0]["data"])
    assert 'llm_rig_requests_done_total{engine="vllm"' in metrics
    assert 'fetch("llm/live.json"' in page and 'href="metrics"' in page  # relative: BASE/...
    assert misses == [404] * 4  # nothing of the rig's left at the root
    for href in ("/llm", "/llm/files/run.json", "/llm/files/requests.jsonl", "/llm/report"):
        assert f'"href": "{base}{href}"' in index or f'"href":"{base}{href}"' in index


def test_the_tabs_itl_percentiles_are_the_summarys_within_half_a_bin():
    """ITL so far comes from 0.01 ms bins (gaps past 1 s exact), read in two batches."""
    import random

    from loadtest.live.webui import ITL_BIN_MS, LiveTally
    from loadtest.results.record import RequestRecord
    from loadtest.results.summary import summarize

    rng = random.Random(36)
    records = []
    for i in range(300):
        gaps = [int(rng.lognormvariate(16.5, 1.0)) for _ in range(rng.randrange(0, 40))]
        gaps += [1_500_000_000] if i % 97 == 0 else []  # a stall of 1.5 s, past the bins
        records.append(RequestRecord(
            request_id=i, prompt_id="p", sent_at=1.0, sent_ns=0, first_chunk_ns=1_000_000,
            done_ns=1_000_000 + sum(gaps), chunk_gaps_ns=gaps, output_chunks=len(gaps) + 1,
            output_tokens=len(gaps) + 1, error_kind="timeout" if i % 50 == 1 else None))
    tally = LiveTally()
    tally.update(records[:120])
    tally.update(records)
    row = summarize(records)
    for q in (50, 90, 99):
        assert tally.itl_ms(q) == pytest.approx(row[f"itl_p{q}_ms"], abs=ITL_BIN_MS / 2 + 1e-4)
    assert tally.itl_ms(100) == pytest.approx(1500.0)
    assert LiveTally().itl_ms(50) is None


def test_the_timeline_is_per_second_then_wider_and_telemetry_is_the_latest_sample(tmp_path: Path):
    """The live series (loadtest/live/series.py): a long run's points widen to stay at most
    MAX_POINTS; the telemetry read is the newest sample of each GPU and of the engine, a
    half-written line left for later."""
    from loadtest.live.series import MAX_POINTS, TelemetryTail, Timeline
    from loadtest.results.record import RequestRecord

    second = 1_000_000_000
    records = [RequestRecord(request_id=i, prompt_id="p", sent_at=0.0, sent_ns=i * second,
                             first_chunk_ns=i * second + 50_000_000, done_ns=i * second + second // 2,
                             output_tokens=10, chunk_gaps_ns=[20_000_000] * 9) for i in range(300)]
    records[7] = RequestRecord(request_id=7, prompt_id="p", sent_at=0.0, sent_ns=7 * second,
                               done_ns=7 * second + 1, error_kind="timeout")
    timeline = Timeline()
    timeline.update(records[:100])
    timeline.update(records)  # only the new ones are read
    points = timeline.points()
    assert len(points) <= MAX_POINTS and points[0]["width_s"] == 3
    assert sum(p["output_tok_per_s"] * p["width_s"] for p in points) == pytest.approx(2990)
    assert points[0]["ttft_p50_ms"] == pytest.approx(50.0)
    assert points[0]["itl_p50_ms"] == pytest.approx(20.0, rel=0.042)  # its bin's middle
    assert points[2]["failed_by_kind"] == {"timeout": 1} and points[2]["failed"] == 1
    assert points[3]["failed_by_kind"] == {} and points[3]["failed"] == 0
    assert all(p["settled"] for p in points)  # no clock given: the run has ended
    path = tmp_path / "telemetry.jsonl"
    path.write_text('{"t": 1, "source": "gpu", "gpu": 0, "util_pct": 10, "mem_used_mib": 5}\n'
                    '{"t": 1, "source": "engine", "running": 3, "waiting": 1, "kv_cache_pct": 9}\n')
    tail = TelemetryTail(path)
    assert tail.latest()["gpus"][0]["util_pct"] == 10
    with path.open("a") as file:
        file.write('{"t": 2, "source": "gpu", "gpu": 0, "util_pct": 80, "mem_used_mib": 6}\n{"t": 3, "sou')
    latest = tail.latest()
    assert latest["gpus"] == [{"gpu": 0, "util_pct": 80, "mem_used_mib": 6, "mem_total_mib": None,
                               "power_w": None}]
    assert latest["engine"] == {"running": 3, "waiting": 1, "kv_cache_pct": 9}
    assert tail.points() == [  # per second from the first sample, the GPUs' mean
        {"t_s": 0, "width_s": 1, "gpu_util_pct": 10.0, "running": 3.0, "waiting": 1.0},
        {"t_s": 1, "width_s": 1, "gpu_util_pct": 80.0, "running": None, "waiting": None}]


def test_the_timeline_counts_tokens_when_their_chunks_arrive_and_says_which_seconds_may_grow():
    """A 3-second answer's 300 tokens fall 100 a second, not 300 in its last second; while the
    run goes on, the seconds within the longest request (plus a worker's second) of now are not
    settled."""
    from loadtest.live.series import Timeline
    from loadtest.results.record import RequestRecord

    second = 1_000_000_000
    long = RequestRecord(request_id=0, prompt_id="p", sent_at=0.0, sent_ns=0, first_chunk_ns=5,
                         done_ns=3 * second - 1, output_tokens=300,
                         chunk_gaps_ns=[10_000_000] * 299)  # a chunk every 10 ms from 5 ns on
    short = RequestRecord(request_id=1, prompt_id="p", sent_at=0.0, sent_ns=4 * second,
                          first_chunk_ns=4 * second, done_ns=4 * second + 1, output_tokens=7)
    timeline = Timeline()
    timeline.update([long, short])
    assert [p["output_tok_per_s"] for p in timeline.points()] == [100, 100, 100, 0, 7]
    now = 6 * second  # the longest took 3 s: up to 6 - 3 - 1 = 2 s from the first send settled
    assert [p["settled"] for p in timeline.points(now)] == [True, True, False, False, False]
