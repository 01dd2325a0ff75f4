"""The console's progress line: how far a headless run is, every few seconds, in one line.

    312/2,000 requests 16% | 0:21, ~1:48 left | 1,482 tok/s | TTFT p50 41 p99 188 ms | 0 failed | cpu 37%
    1:05/3:00 36%, ~1:55 left | 1,532 requests | 2,345 tok/s | TTFT p50 52 p99 240 ms | 2 failed (timeout 2) | cpu 51%

A headless run prints it instead of Locust's periodic stats tables (which show only end-to-end
times from rounded buckets); the summary at the end is as before. On a terminal the line
rewrites itself in place (`\\r`); elsewhere (a log file, a pipe) it is one line per interval.
`--progress-interval S` sets the interval (default 5 s; 0: no line), Locust's `--print-stats`
brings its tables back instead, and `--only-summary` (the race, sweeps and bench) prints
neither. Web UI runs print nothing periodic, as before.

The figures are the run's own, from the same records its row is built from (Run.records; the
master's merged records with --processes, which arrive from each worker once a second):
requests done (failed included) of the total with the end estimated from the pace so far, or
for a time-bounded run (--duration, --stages) the time sent of the duration; output tokens of
completed requests per second since dispatch opened; TTFT p50 and p99 of completed requests
(numpy's linear interpolation, as in the summary); failed requests by error_kind; the client's
CPU (this process's last one-second sample; with worker processes, the busiest worker's, from
Locust's heartbeats). Nothing runs per request or per token: each interval reads only the
records that arrived since the last, adds their TTFTs to a list kept sorted, and formats one
line (the cost is measured in docs/client.md).
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO


from loadtest.toolkit.types import non_negative_number
from loadtest.client.options import ConfigError
from loadtest.results.record import RequestRecord

if TYPE_CHECKING:
    import gevent
    import numpy as np  # imported where it is used: the run's options register without it

    from loadtest.client.run import Run

__all__ = ["DEFAULT_INTERVAL_S", "Progress", "Snapshot", "Tally", "add_progress_option",
           "format_line", "merge_sorted", "progress_interval_s", "sorted_percentile",
           "take_over_console"]

DEFAULT_INTERVAL_S = 5.0


def add_progress_option(parser: Any) -> None:
    # Text here, checked by progress_interval_s: one `error:` line, as for the timing options.
    parser.add_argument("--progress-interval", type=str, default=str(DEFAULT_INTERVAL_S),
                        help="seconds between the progress lines of a headless run (done/total "
                             "or elapsed/duration, tok/s, TTFT p50/p99, failures, client CPU); 0 "
                             f"= none (default {DEFAULT_INTERVAL_S:g}; Locust's --print-stats "
                             "prints its own tables instead, --only-summary neither)")


def progress_interval_s(options: Any) -> float:
    """The options' --progress-interval in seconds; ConfigError (one line) for a bad value."""
    value = getattr(options, "progress_interval", DEFAULT_INTERVAL_S)
    try:
        return non_negative_number(DEFAULT_INTERVAL_S if value is None else value)
    except ValueError as exc:
        raise ConfigError(f"--progress-interval {exc}") from None


def take_over_console(options: Any) -> float | None:
    """The interval of the progress line when this process prints one (a headless master or
    single process, neither --print-stats nor --only-summary, an interval above 0), after
    turning Locust's periodic tables off (its final tables stay); else None, nothing changed.
    Call before Locust starts its printer (the init event)."""
    if (not getattr(options, "headless", False) or getattr(options, "worker", False)
            or getattr(options, "only_summary", False) or getattr(options, "print_stats", False)):
        return None
    interval = progress_interval_s(options)
    if not interval:
        return None
    options.only_summary = True  # Locust's periodic tables off; its final summary is printed
    return interval


def _empty() -> np.ndarray:
    import numpy as np
    return np.empty(0)


@dataclass
class Tally:
    """The run's figures so far, brought up to date from the records that arrived since the
    last update (each record is read once)."""
    done: int = 0  # records finished, failed ones included (context refusals not)
    sessions_done: int = 0
    output_tokens: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    first_sent_at: float | None = None  # unix time: the master's origin (workers' clocks differ)
    _ttfts: np.ndarray = field(default_factory=_empty)  # sorted
    _seen: int = 0

    def update(self, records: Sequence[RequestRecord]) -> None:
        new = records[self._seen:]
        self._seen += len(new)
        ttfts: list[float] = []
        for r in new:
            if r.session_end is not None:
                self.sessions_done += 1
            if self.first_sent_at is None or r.sent_at < self.first_sent_at:
                self.first_sent_at = r.sent_at
            if r.error_kind is None:
                self.done += 1
                self.output_tokens += r.output_tokens or 0
                if r.first_chunk_ns is not None:
                    ttfts.append((r.first_chunk_ns - r.sent_ns) / 1e6)
            elif not r.context_refused:
                self.done += 1
                self.errors[r.error_kind] += 1
        self._ttfts = merge_sorted(self._ttfts, ttfts)

    def ttft_ms(self, q: float) -> float | None:
        """The q-th percentile of the TTFTs so far, numpy's default (linear) method."""
        return sorted_percentile(self._ttfts, q)


def merge_sorted(values: np.ndarray, new: list[float]) -> np.ndarray:
    """`values` (sorted) with `new` merged in, in C: one copy of it, not a sort of it all."""
    import numpy as np
    if not new:
        return values
    batch = np.sort(np.array(new))
    return np.insert(values, np.searchsorted(values, batch), batch)


def sorted_percentile(values: np.ndarray, q: float) -> float | None:
    """The q-th percentile of sorted `values`, numpy's default (linear) method; None if empty."""
    if not len(values):
        return None
    rank = q / 100 * (len(values) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(values) - 1)
    return float(values[low] + (values[high] - values[low]) * (rank - low))


@dataclass(frozen=True)
class Snapshot:
    """What one progress line says."""
    elapsed_s: float | None  # since dispatch opened; None: users still connecting
    done: int
    total: int | None  # the fixed workload's requests (or sessions); None: time-bounded
    duration_s: float | None = None  # a time-bounded run's sending time
    unit: str = "requests"  # or "sessions" (a conversation workload: `done` counts sessions)
    turns: int | None = None  # a conversation's turns done
    output_tokens: int = 0
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    errors: dict[str, int] = field(default_factory=dict)
    cpu_pct: float | None = None
    cpu_of: int = 0  # worker processes the CPU figure is the busiest of; 0: this process
    in_flight: int = 0  # a time-bounded run's requests still out after its duration


def _clock(seconds: float) -> str:
    """0:07, 1:05, 1:02:03."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    return (f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours
            else f"{rest // 60}:{rest % 60:02d}")


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def format_line(s: Snapshot) -> str:
    """The progress line for `s` (docs/client.md shows one)."""
    if s.elapsed_s is None:
        head = f"{s.done:,}/{s.total:,} {s.unit}" if s.total is not None else f"0 {s.unit}"
        return f"{head} | starting: users connecting"
    if s.duration_s is not None:  # time-bounded: where in the duration, then the count
        shown = min(s.elapsed_s, s.duration_s)
        head = (f"{_clock(shown)}/{_clock(s.duration_s)} {100 * shown / s.duration_s:.0f}%, "
                + (f"~{_clock(s.duration_s - s.elapsed_s)} left" if s.elapsed_s < s.duration_s
                   else f"finishing {s.in_flight:,} in flight" if s.in_flight else "done")
                + f" | {s.done:,} {s.unit}")
    else:
        head = f"{s.done:,}/{s.total:,} {s.unit} {100 * s.done / max(s.total or 1, 1):.0f}%"
        if s.turns is not None:
            head += f" ({s.turns:,} turns)"
        head += f" | {_clock(s.elapsed_s)}"
        if 0 < s.done < (s.total or 0) and s.elapsed_s > 0:
            head += f", ~{_clock((s.total - s.done) * s.elapsed_s / s.done)} left"
    tok_s = s.output_tokens / s.elapsed_s if s.elapsed_s > 0 else 0.0
    failed = sum(s.errors.values())
    kinds = ", ".join(f"{kind} {n:,}" for kind, n in sorted(s.errors.items(), key=lambda kv: -kv[1]))
    cpu = "-" if s.cpu_pct is None else f"{s.cpu_pct:.0f}%"
    if s.cpu_of:
        cpu += f" (busiest of {s.cpu_of} workers)"
    return (f"{head} | {tok_s:,.0f} tok/s | TTFT p50 {_ms(s.ttft_p50_ms)} p99 "
            f"{_ms(s.ttft_p99_ms)} ms | {failed:,} failed{f' ({kinds})' if kinds else ''} | "
            f"cpu {cpu}")


class Progress:
    """Prints a run's progress line every `interval_s` (a greenlet of the master or the only
    process) until close(), which prints the last one with its line end."""

    def __init__(self, run: Run, interval_s: float, stream: TextIO | None = None) -> None:
        self.run = run
        self.interval_s = interval_s
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.tally = Tally()
        self._greenlet: gevent.Greenlet | None = None
        self._pending = False  # a terminal line not yet ended: a log line ends it first
        self._gone = False  # the stream could not be written: no more lines
        self._filter = _EndPendingLine(self)
        self._handlers: list[logging.Handler] = []

    def start(self) -> Progress:
        import gevent  # here: `rig run` imports this module for its option, before Locust

        if self.tty:  # Locust's log lines (stderr) would otherwise run on from the line
            loggers = [logging.getLogger(), *(logging.getLogger(name) for name in
                                               list(logging.root.manager.loggerDict))]
            self._handlers = list({id(h): h for lg in loggers for h in lg.handlers
                                   if getattr(h, "stream", None) is self.stream}.values())
            for handler in self._handlers:
                handler.addFilter(self._filter)
        self._greenlet = gevent.spawn(self._print_periodically)
        return self

    def close(self) -> None:
        """The last line, ended: the summary follows it. Idempotent."""
        if self._greenlet is None:
            return
        self._greenlet.kill(block=False)
        self._greenlet = None
        self._print(end=True)
        for handler in self._handlers:
            handler.removeFilter(self._filter)

    def _print_periodically(self) -> None:
        import gevent

        while not self._gone:
            gevent.sleep(self.interval_s)
            self._print(end=False)

    def _print(self, end: bool) -> None:
        """One line; a console that went away (a closed pipe) ends the lines, never the run."""
        if self._gone:
            return
        line = format_line(self.snapshot())
        try:
            if self.tty:
                self.stream.write(f"\r{line}\x1b[K" + ("\n" if end else ""))
                self._pending = not end
            else:
                self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # ValueError: a closed stream
            self._gone = True
            self._pending = False

    def end_pending_line(self) -> None:
        if self._pending:
            self._pending = False
            try:
                self.stream.write("\n")
            except (OSError, ValueError):
                self._gone = True

    def snapshot(self) -> Snapshot:
        """The figures now, the records that arrived since the last snapshot read."""
        run = self.run
        tally = self.tally
        tally.update(run.records)
        dispatcher = run.dispatcher
        if dispatcher.run_origin_ns is not None:
            elapsed: float | None = (time.perf_counter_ns() - dispatcher.run_origin_ns) / 1e9
        elif tally.first_sent_at is not None:  # a master: its workers opened dispatch
            elapsed = max(time.time() - tally.first_sent_at, 0.0)
        else:
            elapsed = None
        sessions = getattr(run.workload, "sessions", None)
        cpu, cpu_of = self._cpu()
        return Snapshot(
            elapsed_s=elapsed,
            done=tally.sessions_done if sessions else tally.done,
            total=None if run.timing.duration_s is not None else (
                len(sessions) if sessions else run.config.requests),
            duration_s=run.timing.duration_s, unit="sessions" if sessions else "requests",
            turns=tally.done if sessions else None, output_tokens=tally.output_tokens,
            ttft_p50_ms=tally.ttft_ms(50), ttft_p99_ms=tally.ttft_ms(99),
            errors=dict(tally.errors), cpu_pct=cpu, cpu_of=cpu_of,
            in_flight=dispatcher.in_flight)

    def _cpu(self) -> tuple[float | None, int]:
        """This process's last CPU sample, or with workers the busiest one's, as each sent it
        with its records (the rig's own sampler: Locust's heartbeat figure read 0% from
        workers its --processes forked, 2026-11-28's H200 lease)."""
        workers = self.run.dispatcher.worker_cpu_pct
        if workers:
            return float(max(workers.values())), len(workers)
        return self.run.cpu.last_pct, 0


class _EndPendingLine(logging.Filter):
    """Ends the progress line on a terminal before a log line is written after it."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self.progress = progress

    def filter(self, record: logging.LogRecord) -> bool:
        self.progress.end_pending_line()
        return True
