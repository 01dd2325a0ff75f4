"""The pacing server: its three streams read with the rig's own reader, its schedule kept, its
lateness counted, many streams at once, several workers behind one port."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from loadtest.client.targets import dialect_for
from loadtest.client.transport import new_client, open_connection, send
from loadtest.client.workload import RequestSpec
from rig_helpers import REPO, free_port, running_pacer

HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


def _get(url: str, method: str = "GET") -> dict:
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30) as r:
        return json.loads(r.read())


def _send(url: str, api: str, prompt: str, max_tokens: int, client=None):
    dialect = dialect_for(api)
    body = dialect.build_body(api, "pacer", prompt, max_tokens, ignore_eos=False, temperature=0)
    spec = RequestSpec(0, prompt, dialect.PATHS[api], body)
    if client is None:
        client = new_client(url, read_timeout_s=30)
        open_connection(client)
    return send(client, spec, dialect.parse_line, dialect.TOKENS_SOURCE, HEADERS)


@pytest.mark.parametrize("api, source", [("completions", "usage"), ("chat", "usage"),
                                         ("generate", "details")])
def test_each_stream_reads_as_a_real_engines_with_the_rigs_reader(api: str, source: str):
    with running_pacer("--ttft-ms", "5", "--gap-ms", "2") as url:
        record = _send(url, api, "one two three", 7)
    assert record.ok, (record.error_kind, record.error)
    assert (record.output_chunks, record.output_tokens, record.output_tokens_source) == (7, 7, source)
    assert record.finish_reason == "length" and record.prompt_tokens == 3
    assert len(record.chunk_gaps_ns) == 6


def test_the_schedule_is_kept_at_low_load():
    """50 ms to the first token, then one every 20 ms, from absolute deadlines: what the rig
    measures is within a few ms of that, and the last token is as punctual as the first.
    (Medians: other work on a shared machine can still preempt either side now and then.)"""
    with running_pacer("--ttft-ms", "50", "--gap-ms", "20") as url:
        client = new_client(url, read_timeout_s=30)
        open_connection(client)
        records = [_send(url, "completions", f"p{i}", 30, client) for i in range(5)]
        lateness = _get(url + "/lateness")
        served = _get(url + "/requests")["requests"]
    assert all(r.ok and r.output_chunks == 30 for r in records)
    assert _median([r.ttft_ms for r in records]) == pytest.approx(50, abs=8)
    assert _median([g / 1e6 for r in records for g in r.chunk_gaps_ns]) == pytest.approx(20, abs=3)
    assert lateness["lateness_ms"]["count"] == 150 and lateness["requests"] == 5
    assert lateness["lateness_ms"]["p50"] < 3
    last_token_late = []
    for entry in served:  # every write at or after its deadline
        deadlines = [entry["read_ns"] + 50_000_000 + k * 20_000_000 for k in range(30)]
        late = [(w - d) / 1e6 for w, d in zip(entry["write_ns"], deadlines)]
        assert min(late) >= 0
        last_token_late.append(late[-1])
    assert _median(last_token_late) < 3  # no drift along the answer


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def test_lateness_and_the_request_log_are_reset():
    with running_pacer("--ttft-ms", "1", "--gap-ms", "1") as url:
        _send(url, "completions", "p", 4)
        assert _get(url + "/lateness")["lateness_ms"]["count"] == 4
        [entry] = _get(url + "/requests")["requests"]
        assert entry["prompt"] == "p" and len(entry["write_ns"]) == 4
        assert _get(url + "/lateness/reset", method="POST") == {"reset": True}
        after = _get(url + "/lateness")
        assert (after["requests"], after["lateness_ms"]["count"]) == (0, 0)
        assert _get(url + "/requests")["requests"] == []


async def _stream(port: int, index: int, tokens: int) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"prompt": f"s{index}", "stream": True, "max_tokens": tokens}).encode()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                 % (len(body), body))
    data = b""
    while not data.endswith(b"0\r\n\r\n"):
        chunk = await reader.read(65536)
        assert chunk, "closed mid-stream"
        data += chunk
    writer.close()
    return data.count(b'"text":" tok"')


def test_serves_over_a_thousand_streams_at_once():
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "loadtest.calibration.pacer", "--port",
                                str(port), "--ttft-ms", "200", "--gap-ms", "50"], cwd=REPO,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert "listening" in process.stdout.readline()

        async def all_streams() -> list[int]:
            return await asyncio.gather(*(_stream(port, i, 5) for i in range(1100)))
        counts = asyncio.run(all_streams())
        lateness = _get(f"http://127.0.0.1:{port}/lateness")
    finally:
        process.terminate()
        process.wait(30)
    assert counts == [5] * 1100
    assert lateness["requests"] == 1100 and lateness["aborted"] == 0


def test_several_workers_share_one_port_and_report_together():
    control = free_port()
    with running_pacer("--workers", "2", "--control-port", str(control), "--ttft-ms", "1",
                       "--gap-ms", "1") as url:
        for i in range(6):  # a fresh connection each: the kernel spreads them over the workers
            assert _send(url, "chat", f"w{i}", 3).ok
        lateness = _get(f"http://127.0.0.1:{control}/lateness")
        served = _get(f"http://127.0.0.1:{control}/requests")
        with pytest.raises(urllib.error.HTTPError) as refused:
            _get(url + "/lateness")
    assert refused.value.code == 409
    assert lateness["workers"] == 2 and lateness["requests"] == 6
    assert sorted(e["prompt"] for e in served["requests"]) == [f"w{i}" for i in range(6)]


def test_workers_report_logs_larger_than_a_pipe_buffer():
    """Each worker's dump (every token's write stamp) crosses its pipe to the control process;
    at 200 requests x 64 tokens a worker's is over 64 KB, a pipe's buffer."""
    control = free_port()
    with running_pacer("--workers", "2", "--control-port", str(control), "--ttft-ms", "1",
                       "--gap-ms", "1", "--tokens", "64") as url:
        port = int(url.rsplit(":", 1)[1])

        async def all_streams() -> list[int]:
            return await asyncio.gather(*(_stream(port, i, 64) for i in range(400)))
        counts = asyncio.run(all_streams())
        served = _get(f"http://127.0.0.1:{control}/requests")
    assert counts == [64] * 400
    assert len(served["requests"]) == 400


def test_bad_options_and_a_busy_port_are_one_error_line():
    with running_pacer() as url:
        port = url.rsplit(":", 1)[1]
        busy = subprocess.run([sys.executable, "-m", "loadtest.calibration.pacer", "--port", port],
                              cwd=REPO, capture_output=True, text=True, timeout=30)
    bad = subprocess.run([sys.executable, "-m", "loadtest.calibration.pacer", "--tokens", "0"],
                         cwd=REPO, capture_output=True, text=True, timeout=30)
    for result in (busy, bad):
        assert result.returncode == 2
        assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
