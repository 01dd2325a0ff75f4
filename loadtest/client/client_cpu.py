"""CPU use of this load-generator process, sampled while the run is in flight.

A client near one full core delays its own timestamps (every greenlet waits for the CPU), so
each run records its peak and mean and is flagged when the peak passes 90%. Its run-queue
wait over the same span (runqueue.py) says how long it was ready to run but given no core.
"""

from __future__ import annotations

import time

import gevent
import psutil

from loadtest.client.runqueue import RunQueueWait

__all__ = ["CpuSampler"]

_INTERVAL_S = 1.0


class CpuSampler:
    def __init__(self) -> None:
        self._process = psutil.Process()
        self._samples: list[float] = []
        self._greenlet: gevent.Greenlet | None = None
        self._start_cpu = 0.0
        self._start_wall = 0.0
        self._runqueue = RunQueueWait()

    def start(self) -> None:
        self._process.cpu_percent(None)  # the first call only sets the baseline
        self._start_cpu = sum(self._process.cpu_times()[:2])
        self._start_wall = time.monotonic()
        self._runqueue.start()
        self._greenlet = gevent.spawn(self._sample)

    def _sample(self) -> None:
        while True:
            gevent.sleep(_INTERVAL_S)
            self._samples.append(self._process.cpu_percent(None))

    @property
    def last_pct(self) -> float | None:
        """The last one-second sample (the console's progress line), None before the first."""
        return self._samples[-1] if self._samples else None

    def stop(self) -> dict[str, float | None]:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
        wall = time.monotonic() - self._start_wall
        used = sum(self._process.cpu_times()[:2]) - self._start_cpu
        mean = 100.0 * used / wall if wall > 0 else None
        peak = max(self._samples) if self._samples else mean
        return {"client_cpu_max_pct": peak, "client_cpu_mean_pct": mean,
                **self._runqueue.stop(wall)}

