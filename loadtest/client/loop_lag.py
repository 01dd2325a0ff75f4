"""How late this load generator's event loop wakes up, measured while the run is in flight.

Every timestamp the rig takes waits for the gevent loop to reach its greenlet. A greenlet that
asks to sleep a fixed tick and times how late it really woke measures that wait directly: a
loop that keeps up wakes it within a fraction of a millisecond; a loop busy parsing streams
(or a process starved of CPU by an engine on the same cores) wakes it late, and every chunk
stamped meanwhile was stamped late by about as much.
"""

from __future__ import annotations

from time import perf_counter_ns

import gevent
import numpy as np

__all__ = ["LoopLag"]

_TICK_S = 0.01


class LoopLag:
    def __init__(self) -> None:
        self._lags_ns: list[int] = []
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        self._greenlet = gevent.spawn(self._measure)

    def _measure(self) -> None:
        tick_ns = int(_TICK_S * 1e9)
        while True:
            asked = perf_counter_ns()
            gevent.sleep(_TICK_S)
            self._lags_ns.append(perf_counter_ns() - asked - tick_ns)

    def stop(self) -> dict[str, float | None]:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
        if not self._lags_ns:
            return {"loop_lag_p99_ms": None, "loop_lag_max_ms": None}
        lags_ms = np.asarray(self._lags_ns, dtype=float) / 1e6
        return {"loop_lag_p99_ms": float(np.percentile(lags_ms, 99)),
                "loop_lag_max_ms": float(lags_ms.max())}
