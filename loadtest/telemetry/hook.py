"""Start and stop the sampler process around one run, from the Locust master (or only) process.

    telemetry = start_telemetry(run_dir, engine, url, gpu)   # after run.json is written
    telemetry.wait_ready()                                    # before the first request
    row.update(telemetry.stop(row["output_tokens"], spans))  # once the last request is done

Which GPUs: `--gpu` given as NVML indices ("0" or "0,1") samples those; any other value samples
every visible GPU when the engine is on this host (127.0.0.1, localhost, ::1) and none otherwise
(a remote engine's GPUs are not this host's). Telemetry never fails a run: a sampler that cannot
start or stop leaves `telemetry_gpu`/`telemetry_engine` saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from loadtest.toolkit.repo import REPO
from loadtest.telemetry.gauges import GAUGE_COLUMNS, GAUGES_READ_ZERO, gauges_read_zero
from loadtest.telemetry.summary import per_token_columns, summarize_telemetry

__all__ = ["Telemetry", "gpu_selection", "start_telemetry"]

_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
_STOP_WAIT_S = 10.0
_FIRST_SAMPLE_WAIT_S = 5.0
_ROW_SKIP = {"telemetry_notes", "telemetry_interval_s", "telemetry_per_gpu"}


def gpu_selection(gpu: str, url: str) -> str:
    """The sampler's --gpus value for the run's --gpu text and engine URL."""
    parts = [part.strip() for part in gpu.split(",")]
    if gpu.strip() and all(part.isdigit() for part in parts):
        return ",".join(parts)
    return "all" if urlparse(url).hostname in _LOCAL_HOSTS else "none"


class Telemetry:
    def __init__(self, run_dir: Path, process: subprocess.Popen[bytes] | None) -> None:
        self.run_dir = run_dir
        self._process = process

    def stop(self, output_tokens: int | None,
             spans: Sequence[tuple[float, float]] = ()) -> dict[str, Any]:
        """Stop sampling (SIGTERM, bounded wait) and return the columns for the run's row.
        ``spans``: the run's requests, (sent, done) in unix seconds (gauges.request_spans), to
        hold the engine's request gauges against."""
        if self._process is None:
            return {"telemetry_gpu": "failed", "telemetry_engine": "failed"}
        if self._process.poll() is None:
            self.wait_ready()  # a run shorter than the sampler's start-up: let it write a sample
            self._process.terminate()
            try:
                self._process.wait(timeout=_STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        summary = self._summary()
        row = {k: v for k, v in summary.items() if k not in _ROW_SKIP}
        if row.get("telemetry_engine") == "sampled" and gauges_read_zero(self._samples("engine"), spans):
            row = {k: v for k, v in row.items() if k not in GAUGE_COLUMNS}
            row["telemetry_engine"] = GAUGES_READ_ZERO
        return {**row, **per_token_columns(row, output_tokens)}

    def wait_ready(self) -> None:
        """Wait, bounded, until the sampler is up (its first line is written). The run waits
        for this before its first request: measured on the 2-core CPU engine, a sampler still
        starting (and first scraping) while the first requests streamed delayed them by up to
        1.5 s. Cooperative under Locust, whose gevent patches time.sleep."""
        if self._process is None:
            return
        lines = self.run_dir / "telemetry.jsonl"
        deadline = time.monotonic() + _FIRST_SAMPLE_WAIT_S
        while time.monotonic() < deadline and self._process.poll() is None:
            if lines.exists() and lines.stat().st_size > 0:
                return
            time.sleep(0.05)

    def _summary(self) -> dict[str, Any]:
        path = self.run_dir / "telemetry_summary.json"
        if path.exists():
            return json.loads(path.read_text(encoding="utf-8"))
        # the sampler died before its summary: the samples it wrote still count
        return summarize_telemetry(self._samples(), {"gpu": "failed", "engine": "failed"})

    def _samples(self, source: str | None = None) -> list[dict[str, Any]]:
        samples = []
        lines = self.run_dir / "telemetry.jsonl"
        if lines.exists():
            for line in lines.read_text(encoding="utf-8").splitlines():
                try:
                    sample = json.loads(line)
                except ValueError:
                    continue
                if source is None or sample.get("source") == source:
                    samples.append(sample)
        return samples


def start_telemetry(run_dir: Path, engine: str, url: str, gpu: str,
                    interval_s: float = 0.5, engine_urls: Sequence[str] = ()) -> Telemetry:
    """`engine_urls`: the engine's own endpoints behind the balancer at `url` (its replicas),
    whose /metrics are read and merged; none: `url`'s."""
    cmd = [sys.executable, "-m", "loadtest.telemetry", "--run-dir", str(run_dir),
           "--engine", engine, "--url", url, "--gpus", gpu_selection(gpu, url),
           "--interval", str(interval_s), "--parent-pid", str(os.getpid())]
    for engine_url in engine_urls:
        cmd += ["--metrics-url", engine_url]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        with (run_dir / "telemetry.log").open("ab") as log:
            process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env)
    except OSError:
        process = None
    return Telemetry(run_dir, process)
