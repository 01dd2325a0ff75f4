"""Exactly N requests, each sent once, across every user of every process; then the run ends.

Core Locust has no request limit (and locust-plugins' per-process count is not exact across
workers), so the queue lives here:
- local run: one in-process queue; the last request to finish quits the runner.
- --processes / master+workers: the master owns the queue and workers pull request ids with
  messages (need -> work), so dispatch stays one global FIFO and uneven output lengths never
  leave one process idle while another is backed up. A worker that has drained its share sends
  its records, flushes its Locust stats, then says done (ZMQ keeps that order); the master quits
  when the queue is empty and every worker that got work is done, and stops the run early if a
  worker that holds requests quits (interrupted) or goes missing (interrupted, exit 2).
Dispatch starts only once all users are spawned and every user of this process has opened its
connection (on_start), so neither the spawn ramp nor connection set-up is part of the run: the
first wave of requests leaves together, as from a client that was already connected.
Each host's clock (CLOCK_MONOTONIC, the records' clock) counts from its own boot, so a worker first
measures its offset from the master's clock (round trips of `rig_clock`, the one with the shortest
trip kept: its error is at most half that trip) and puts every absolute time of its records on the
master's clock before sending them (`on_clock`); its report says how close that is
(`clock_sync_error_ms`).
Open loop (--rate, loadtest/client/arrivals.py): the same queue in the same order, but a user that
takes request i sleeps until its scheduled time first; the schedule's origin is the moment
dispatch opens (local) or the master's first hand-out (sent to workers on the master's clock).
`complete` stamps each record with its scheduled time and the time it waited for a free user.
Conversations (Workload.sessions, loadtest/client/conversation.py): the unit handed out is a
session, not a request: the queue holds session indices, a user takes a session and sends its
turns, and the session is done with its last record; in open loop the schedule gives each
session's start (its first turn). Across processes the same, with session indices as the ids.
Time-bounded runs (--duration, --stages: loadtest/client/timing.py): the queue cycles through
the workload, each send numbered anew (its record's request_id), and take() hands out nothing once
the duration from the origin has passed; the run ends when the last request in flight is done.
Across processes (--duration and --stages alike) the master numbers the sends and owns the
duration from its first hand-out: a worker sends what it is handed (send n is the workload's
request n modulo its length, due at the schedule's offset n in open loop) until handed nothing.
Once the duration is over the master tells every worker that got work so (an empty hand-out),
so one whose users a stage has stopped, and that asks for nothing, still reports done.
Staged load opens dispatch with the first ready user (a ramp spawns the rest while it runs) and
leaves the quitting to its shape (loadtest/client/shape.py); across processes the shape runs on
the master, which spreads each stage's users over the workers (Locust's own distribution).
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import gevent
from gevent.event import Event
from time import perf_counter_ns
from locust.runners import STATE_MISSING, MasterRunner, WorkerRunner

from loadtest.client.conversation import Conversation
from loadtest.results.record import RequestRecord, on_clock
from loadtest.workload.spec import RequestSpec, Workload

__all__ = ["Dispatcher"]

_RECORD_BATCH_S = 1.0
_WATCH_WORKERS_S = 1.0
_CLOCK_PINGS = 8  # round trips to the master; the shortest one's offset is kept
_CLOCK_REPLY_S = 10.0


class Dispatcher:
    def __init__(self, environment: Any, workload: Workload,
                 on_record: Callable[[RequestRecord], None], on_finished: Callable[[], None],
                 worker_report: Callable[[], dict[str, Any]] = dict,
                 schedule_ns: list[int] | None = None, schedule_sha: str = "",
                 units: Sequence[Conversation] | None = None, duration_s: float | None = None,
                 shaped: bool = False,
                 cpu_pct: Callable[[], float | None] = lambda: None) -> None:
        self.environment = environment
        self.runner = environment.runner
        self.workload = workload
        # what take() hands out, by queue id: the requests, or the sessions (Conversations)
        self._units: Sequence[RequestSpec] | Sequence[Conversation] = (
            workload.specs if units is None else units)
        self.on_record = on_record  # master/local: called for every record of every process
        self.on_finished = on_finished  # master/local: called once, when the last request is done
        self.worker_report = worker_report  # worker: extra data sent with "done" (e.g. CPU use)
        self.worker_reports: list[dict[str, Any]] = []
        self.cpu_pct = cpu_pct  # worker: this process's last CPU sample, sent with its records
        self.worker_cpu_pct: dict[int, float] = {}  # master: each worker's, as last sent
        self.started = Event()
        self._spawned = False
        self._ready_users = 0
        self._queue: deque[int] = deque()
        self._in_flight = 0
        self._exhausted = False
        self._finished = False
        self._refill = Event()
        self._asking = False
        self._waiting = 0
        self._outgoing: list[dict[str, Any]] = []
        self._busy_workers: set[str] = set()
        # open loop: each unit's offset from the origin; per taken unit (due, cap wait)
        self._schedule = schedule_ns
        self._sha = workload.sha256 + schedule_sha
        self._origin_ns: int | None = None  # this process's perf_counter_ns at offset 0
        self._origin_master_ns: int | None = None  # master: the origin it hands to workers
        # worker: master's clock - this one's, and half the round trip that measured it
        self._clock_offset_ns = 0
        self._clock_error_ns: int | None = None
        self._clock_reply = Event()
        self._clock_sample: tuple[int, int] | None = None
        self._clock_done = Event()
        self._due: dict[int, tuple[int, int]] = {}
        # time-bounded: the end of sending (origin + duration) and the sends so far
        self._duration_ns = None if duration_s is None else round(duration_s * 1e9)
        self._shaped = shaped  # a load shape spawns users as it goes and ends the test
        self.run_origin_ns: int | None = None  # when dispatch opened (perf_counter_ns)
        self._deadline_ns: int | None = None
        self._sends = 0
        self._told_over = False  # master: every worker told the timed run's sending is over
        self._register()

    @property
    def is_worker(self) -> bool:
        return isinstance(self.runner, WorkerRunner)

    def _register(self) -> None:
        if isinstance(self.runner, MasterRunner):
            if self._duration_ns is None:  # timed: _on_need numbers the sends
                self._queue.extend(range(len(self._units)))
            self.runner.register_message("rig_need", self._on_need)
            self.runner.register_message("rig_records", self._on_records)
            self.runner.register_message("rig_done", self._on_done)
            self.runner.register_message("rig_clock", self._on_clock_ping)
            gevent.spawn(self._watch_workers)
        elif self.is_worker:
            self.runner.register_message("rig_work", self._on_work)
            self.runner.register_message("rig_clock", self._on_clock_reply)
            gevent.spawn(self._sync_clock)  # while users spawn: done before dispatch opens
            gevent.spawn(self._send_records_periodically)
        else:
            self._queue.extend(range(len(self._units)))

    # --- every process: the gate, then users take work and hand back records ---------------------

    def user_ready(self) -> None:
        """A user of this process has finished on_start."""
        self._ready_users += 1
        self._maybe_open()

    def spawning_complete(self) -> None:
        """Locust has spawned every user (of every process)."""
        self._spawned = True
        self._maybe_open()

    def _maybe_open(self) -> None:
        # Locust fires spawning_complete before the last users' greenlets have run on_start.
        if self.started.is_set():
            return
        if (self._spawned or self._shaped) and self._ready_users >= (
                1 if self._shaped else self.runner.user_count):
            self.run_origin_ns = perf_counter_ns()
            if self._duration_ns is not None and not self.is_worker:  # a worker's is the master's
                self._deadline_ns = self.run_origin_ns + self._duration_ns
            if self._schedule is not None and not self.is_worker and self._origin_ns is None:
                self._origin_ns = perf_counter_ns()
            self.started.set()

    def take(self) -> RequestSpec | Conversation | None:
        """The next request (or session) for a user, or None when the workload is used up
        (open loop: at its scheduled time, or at once when that time has passed)."""
        free_ns = perf_counter_ns()  # this user is free from now (before the gate: the origin)
        self.started.wait()
        if self._deadline_ns is not None:
            return self._take_timed(free_ns)
        while not self._queue:
            if not self.is_worker or self._exhausted:
                return None
            self._ask_for_work()
        self._in_flight += 1
        unit = self._queue.popleft()
        if self._schedule is not None:
            self._wait_until_due(unit, free_ns)
        if self._duration_ns is not None:  # a worker's timed run: `unit` numbers the send
            return dataclasses.replace(self._units[unit % len(self._units)], request_id=unit)
        return self._units[unit]

    def _take_timed(self, free_ns: int) -> RequestSpec | None:
        """A time-bounded run's next request: the workload's next, cycling, numbered by send."""
        if self._sending_over():
            self._maybe_finish()  # the last request may have ended before the deadline
            return None
        send = self._sends
        self._sends += 1
        self._in_flight += 1
        if self._schedule is not None:  # open-loop stages: send `send` is due at its offset
            self._wait_until_due(send, free_ns)
        return dataclasses.replace(self._units[send % len(self._units)], request_id=send)

    def _sending_over(self) -> bool:
        """Nothing more to hand out: the queue is empty, or a time-bounded run's duration (or
        its schedule) is over."""
        if self._deadline_ns is None:
            return not self._queue
        return perf_counter_ns() >= self._deadline_ns or (
            self._schedule is not None and self._sends >= len(self._schedule))

    def _wait_until_due(self, unit: int, free_ns: int) -> None:
        """Open loop: sleep until the request's time. A user that became free only after it
        (every user was busy: the --users cap was full) sends at once; that wait is recorded."""
        assert self._origin_ns is not None
        due = self._origin_ns + self._schedule[unit]
        self._due[unit] = (due, max(0, free_ns - due))
        delay_ns = due - perf_counter_ns()
        if delay_ns > 0:
            gevent.sleep(delay_ns / 1e9)
            while perf_counter_ns() < due:  # gevent's timers may wake a little early
                gevent.sleep(0)

    def complete(self, record: RequestRecord, ends_unit: bool = True) -> None:
        """A record is done; `ends_unit`: its request, or its session's last turn, is the last
        of what its user took."""
        if ends_unit:
            self._in_flight -= 1
        unit = record.request_id if record.session_id is None else record.session_id
        if record.turn in (None, 1) and unit in self._due:  # a later turn has its own due time
            record.scheduled_ns, record.cap_wait_ns = self._due.pop(unit)
        if self.is_worker:
            row = on_clock(record.to_json(), self._clock_offset_ns)
            if record.output_text is not None:  # --keep-outputs, --recount: the master needs them
                row["output_ids"], row["output_text"] = record.output_ids, record.output_text
            self._outgoing.append(row)
        else:
            self.on_record(record)
        self._maybe_finish()

    def _maybe_finish(self) -> None:
        if self._finished or not self._sending_over() or self._in_flight:
            return
        if self.is_worker:
            if self._exhausted:
                self._finished = True
                self._send_records()
                self.runner._send_stats()  # private API (locust pinned): final stats before "done"
                self.runner.send_message("rig_done", {**self.worker_report(),
                                                      **self.clock_report()})
        elif not isinstance(self.runner, MasterRunner):
            self._finish()

    def _finish(self) -> None:
        self._finished = True
        self.on_finished()
        if not self._shaped:  # a shape quits at its next tick (two stops at once would clash)
            gevent.spawn(self.runner.quit)

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def in_flight(self) -> int:
        """Requests (or sessions) this process has taken and not yet completed."""
        return self._in_flight

    # --- worker side ---------------------------------------------------------------------------

    def _ask_for_work(self) -> None:
        self._waiting += 1
        if not self._asking:
            self._asking = True
            self._refill.clear()
            self._clock_done.wait()  # its records are sent on the master's clock
            self.runner.send_message("rig_need", {"n": self._waiting, "sha": self._sha})
        self._refill.wait()
        self._waiting -= 1

    def _sync_clock(self) -> None:
        """The master's clock minus this one's, from the shortest of a few round trips (NTP's
        rule: the offset is off by at most half the trip it was measured over)."""
        best: tuple[int, int] | None = None  # (round trip, offset)
        for _ in range(_CLOCK_PINGS):
            self._clock_reply.clear()
            self.runner.send_message("rig_clock", {"t0": perf_counter_ns()})
            if not self._clock_reply.wait(_CLOCK_REPLY_S) or self._clock_sample is None:
                break
            if best is None or self._clock_sample[0] < best[0]:
                best = self._clock_sample
        if best is None:
            logging.error("error: the master did not answer the clock check; this worker's "
                          "times are sent on its own clock")
            self._clock_error_ns = -1
        else:
            trip, self._clock_offset_ns = best
            self._clock_error_ns = trip // 2
        self._clock_done.set()

    def _on_clock_reply(self, msg: Any, **_: Any) -> None:
        t1 = perf_counter_ns()
        t0, master_ns = msg.data["t0"], msg.data["master_ns"]
        self._clock_sample = (t1 - t0, master_ns - (t0 + t1) // 2)
        self._clock_reply.set()

    def clock_report(self) -> dict[str, Any]:
        """A worker's word on its clock, for the master's row and run.json's `workers`: its
        index, the offset it measured (the master's clock minus its own) and that offset's
        error bound (no clock figures where not measured)."""
        report: dict[str, Any] = {"worker": max(getattr(self.runner, "worker_index", 0), 0)}
        if self._clock_error_ns is None or self._clock_error_ns < 0:
            return report
        return {**report, "clock_offset_ms": self._clock_offset_ns / 1e6,
                "clock_sync_error_ms": self._clock_error_ns / 1e6}

    def _on_work(self, msg: Any, **_: Any) -> None:
        ids = msg.data["ids"]
        if self._schedule is not None and self._origin_ns is None and msg.data.get("origin"):
            # the master's origin, on this process's clock
            self._origin_ns = msg.data["origin"] - self._clock_offset_ns
        self._queue.extend(ids)
        self._exhausted = not ids
        self._asking = False
        self._refill.set()
        self._maybe_finish()

    def _send_records(self) -> None:
        if self._outgoing:
            batch, self._outgoing = self._outgoing, []
            self.runner.send_message("rig_records", {
                "records": batch, "cpu_pct": self.cpu_pct(),
                "worker": max(getattr(self.runner, "worker_index", 0), 0)})

    def _send_records_periodically(self) -> None:
        while not self._finished:
            gevent.sleep(_RECORD_BATCH_S)
            if not self._finished:
                self._send_records()

    # --- master side ---------------------------------------------------------------------------

    def _on_need(self, msg: Any, **_: Any) -> None:
        if msg.data["sha"] != self._sha:
            logging.error("error: a worker built a different workload or schedule (check its "
                          "options and files)")
            self.environment.process_exit_code = 2
            gevent.spawn(self.runner.quit)
            return
        ids = (self._timed_ids(msg.data["n"]) if self._duration_ns is not None else
               [self._queue.popleft() for _ in range(min(msg.data["n"], len(self._queue)))])
        if ids:
            self._busy_workers.add(msg.node_id)
        if self._schedule is not None and self._origin_master_ns is None:
            self._origin_master_ns = perf_counter_ns()  # the schedule starts with the first hand-out
        self.runner.send_message("rig_work", {"ids": ids, "origin": self._origin_master_ns},
                                 client_id=msg.node_id)

    def _timed_ids(self, wanted: int) -> list[int]:
        """A timed run's next `wanted` send numbers, none once its duration from the first
        hand-out has passed (or an open-loop schedule's sends are all handed out)."""
        now = perf_counter_ns()
        if self._deadline_ns is None:
            self.run_origin_ns, self._deadline_ns = now, now + self._duration_ns
        if now >= self._deadline_ns:
            return []
        if self._schedule is not None:
            wanted = min(wanted, len(self._schedule) - self._sends)
        ids = list(range(self._sends, self._sends + wanted))
        self._sends += len(ids)
        return ids

    def _tell_sending_over(self) -> None:
        """A timed run past its duration (or its schedule handed out): an empty hand-out to each
        worker that got work, once; a worker's users may be waiting for nothing (a stage
        stopped them all), so it would not ask and learn it."""
        if self._told_over or self._deadline_ns is None or not (
                perf_counter_ns() >= self._deadline_ns
                or (self._schedule is not None and self._sends >= len(self._schedule))):
            return
        self._told_over = True
        for worker in list(self._busy_workers):
            self.runner.send_message("rig_work", {"ids": [], "origin": self._origin_master_ns},
                                     client_id=worker)

    def _on_clock_ping(self, msg: Any, **_: Any) -> None:
        self.runner.send_message("rig_clock", {"t0": msg.data["t0"], "master_ns": perf_counter_ns()},
                                 client_id=msg.node_id)

    def _on_records(self, msg: Any, **_: Any) -> None:
        if msg.data.get("cpu_pct") is not None:
            self.worker_cpu_pct[msg.data["worker"]] = msg.data["cpu_pct"]
        for row in msg.data["records"]:
            self.on_record(RequestRecord.from_json(row))

    def _watch_workers(self) -> None:
        """A worker that leaves while it holds requests takes them with it, so the workload can no
        longer be exact: the run stops as interrupted (records kept, no row) instead of waiting
        for records that will never come. One that went missing (no heartbeat for ~3 s: a host
        or network lost) is an error, exit 2; one that quit (Ctrl-C) is an interruption."""
        while not self._finished:
            gevent.sleep(_WATCH_WORKERS_S)
            self._tell_sending_over()
            clients = self.runner.clients
            quit_ = [w for w in self._busy_workers if clients.get(w) is None]
            missing = [w for w in self._busy_workers
                       if clients.get(w) is not None and clients.get(w).state == STATE_MISSING]
            if self._finished or not (quit_ or missing):
                continue
            self._finished = True
            if missing:
                logging.error("error: worker %s went missing with requests in flight; the run is "
                              "incomplete (its records so far are kept)", ", ".join(missing))
                self.environment.process_exit_code = 2
            else:
                logging.warning("worker %s quit with requests in flight; the run is interrupted",
                                ", ".join(quit_))
            gevent.spawn(self.runner.quit)
            return

    def _on_done(self, msg: Any, **_: Any) -> None:
        self.worker_reports.append(msg.data or {})
        self._busy_workers.discard(msg.node_id)
        if not self._queue and not self._busy_workers and not self._finished:
            self._finish()
