"""The sampler process: GPU and engine samples every interval into RUN_DIR/telemetry.jsonl
until SIGTERM (or its parent dies), then RUN_DIR/telemetry_summary.json.

It runs apart from Locust on purpose: Locust is gevent-based, and a blocking NVML call or HTTP
scrape in its process would delay the request timestamps it exists to measure.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from loadtest.results.files import write_json
from loadtest.telemetry.engine import engine_sample, merged_samples, metric_names_for, scrape
from loadtest.telemetry.gpu import Gpu, close_gpus, open_gpus
from loadtest.telemetry.summary import per_gpu_summary, summarize_telemetry
from servers.registry import SPECS

__all__ = ["Sampler"]

_GIVE_UP_AFTER = 3  # failed scrapes before any success: the endpoint is off, stop asking


class Sampler:
    def __init__(self, run_dir: Path, engine: str, urls: list[str], gpus: list[int] | None | str,
                 interval_s: float = 0.5) -> None:
        """`urls`: the engine's base URLs whose /metrics are read (several: replicas behind a
        balancer, their samples merged as one engine's label sets are); `gpus`: NVML indices,
        None for every visible GPU, or a reason string for none."""
        self.run_dir = run_dir
        self.urls = urls
        self.interval_s = interval_s
        self.names = metric_names_for(engine)
        self.state = {"gpu": "absent", "engine": "absent"}
        self.notes: list[str] = []
        self.gpus: list[Gpu] = []
        if isinstance(gpus, str):
            self.state["gpu"] = "not_sampled"
            self.notes.append(f"gpu: {gpus}")
        else:
            self.gpus, why = open_gpus(gpus)
            self.state["gpu"] = "sampled" if self.gpus else "absent"
            if why:
                self.notes.append(f"gpu: {why}")
        if self.names is None:
            why = SPECS[engine].metrics_none if engine in SPECS else "an engine the rig does not know"
            self.notes.append(f"engine: no metrics read: {why}")
        self._scrape_failures = 0
        self._scraped = False
        self._stopping = False
        self.samples: list[dict[str, Any]] = []

    def stop(self, *_: Any) -> None:
        self._stopping = True

    def run(self, parent_pid: int | None = None) -> dict[str, Any]:
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with (self.run_dir / "telemetry.jsonl").open("a", encoding="utf-8") as file:
            # The first line says the sampler is up and what it samples. It is written after the
            # first sample is taken, so a run that waits for it (the hook) has neither the
            # sampler's start-up nor its first scrape inside its first requests.
            start = {"t": time.time(), "source": "sampler", "interval_s": self.interval_s,
                     "gpus": self._gpu_names(), "engine_metrics": self.names is not None}
            next_s = time.monotonic()
            rows = [start, *self._tick()]
            while True:
                for row in rows:
                    file.write(json.dumps(row, separators=(",", ":")) + "\n")
                file.flush()
                next_s += self.interval_s
                while not self._stopping and time.monotonic() < next_s:
                    time.sleep(min(0.05, max(next_s - time.monotonic(), 0)))
                if self._stopping or _orphaned(parent_pid):
                    break
                rows = self._tick()
            for sample in self._tick():  # the closing sample bounds the energy window
                file.write(json.dumps(sample, separators=(",", ":")) + "\n")
        close_gpus()
        summary = {**summarize_telemetry(self.samples, self.state),
                   "telemetry_per_gpu": per_gpu_summary(self.samples), "telemetry_notes": self.notes,
                   "telemetry_interval_s": self.interval_s, "gpu_names": self._gpu_names()}
        write_json(self.run_dir / "telemetry_summary.json", summary)
        return summary

    def _tick(self) -> list[dict[str, Any]]:
        now_s = time.time()
        rows = [{"t": now_s, "source": "gpu", **gpu.sample()} for gpu in self.gpus]
        engine = self._engine(now_s)
        if engine is not None:
            rows.append(engine)
        self.samples += rows
        return rows

    def _engine(self, now_s: float) -> dict[str, Any] | None:
        if self.names is None or (not self._scraped and self._scrape_failures >= _GIVE_UP_AFTER):
            return None
        try:
            fields = engine_sample(merged_samples(scrape(url) for url in self.urls), self.names)
        except OSError as exc:
            self._scrape_failures += 1
            if not self._scraped and self._scrape_failures == _GIVE_UP_AFTER:
                where = ", ".join(f"{url}/metrics" for url in self.urls)
                self.notes.append(f"engine: no metrics at {where} ({exc})")
            return None
        self._scraped = True
        self.state["engine"] = "sampled"
        return {"t": now_s, "source": "engine", **fields}

    def _gpu_names(self) -> str:
        return ";".join(f"{gpu.index}:{gpu.name}" for gpu in self.gpus)


def _orphaned(parent_pid: int | None) -> bool:
    return parent_pid is not None and os.getppid() != parent_pid
