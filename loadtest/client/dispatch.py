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
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import gevent
from gevent.event import Event
from locust.runners import STATE_MISSING, MasterRunner, WorkerRunner

from loadtest.results.record import RequestRecord
from loadtest.client.workload import RequestSpec, Workload

__all__ = ["Dispatcher"]

_RECORD_BATCH_S = 1.0
_WATCH_WORKERS_S = 1.0


class Dispatcher:
    def __init__(self, environment: Any, workload: Workload,
                 on_record: Callable[[RequestRecord], None], on_finished: Callable[[], None],
                 worker_report: Callable[[], dict[str, Any]] = dict) -> None:
        self.environment = environment
        self.runner = environment.runner
        self.workload = workload
        self.on_record = on_record  # master/local: called for every record of every process
        self.on_finished = on_finished  # master/local: called once, when the last request is done
        self.worker_report = worker_report  # worker: extra data sent with "done" (e.g. CPU use)
        self.worker_reports: list[dict[str, Any]] = []
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
        self._register()

    @property
    def is_worker(self) -> bool:
        return isinstance(self.runner, WorkerRunner)

    def _register(self) -> None:
        if isinstance(self.runner, MasterRunner):
            self._queue.extend(range(len(self.workload.specs)))
            self.runner.register_message("rig_need", self._on_need)
            self.runner.register_message("rig_records", self._on_records)
            self.runner.register_message("rig_done", self._on_done)
            gevent.spawn(self._watch_workers)
        elif self.is_worker:
            self.runner.register_message("rig_work", self._on_work)
            gevent.spawn(self._send_records_periodically)
        else:
            self._queue.extend(range(len(self.workload.specs)))

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
        if self._spawned and self._ready_users >= self.runner.user_count:
            self.started.set()

    def take(self) -> RequestSpec | None:
        """The next request for a user, or None when the workload is used up."""
        self.started.wait()
        while not self._queue:
            if not self.is_worker or self._exhausted:
                return None
            self._ask_for_work()
        self._in_flight += 1
        return self.workload.specs[self._queue.popleft()]

    def complete(self, record: RequestRecord) -> None:
        self._in_flight -= 1
        if self.is_worker:
            self._outgoing.append(record.to_json())
        else:
            self.on_record(record)
        self._maybe_finish()

    def _maybe_finish(self) -> None:
        if self._finished or self._queue or self._in_flight:
            return
        if self.is_worker:
            if self._exhausted:
                self._finished = True
                self._send_records()
                self.runner._send_stats()  # private API (locust pinned): final stats before "done"
                self.runner.send_message("rig_done", self.worker_report())
        elif not isinstance(self.runner, MasterRunner):
            self._finish()

    def _finish(self) -> None:
        self._finished = True
        self.on_finished()
        gevent.spawn(self.runner.quit)

    # --- worker side ---------------------------------------------------------------------------

    def _ask_for_work(self) -> None:
        self._waiting += 1
        if not self._asking:
            self._asking = True
            self._refill.clear()
            self.runner.send_message("rig_need", {"n": self._waiting, "sha": self.workload.sha256})
        self._refill.wait()
        self._waiting -= 1

    def _on_work(self, msg: Any, **_: Any) -> None:
        ids = msg.data["ids"]
        self._queue.extend(ids)
        self._exhausted = not ids
        self._asking = False
        self._refill.set()
        self._maybe_finish()

    def _send_records(self) -> None:
        if self._outgoing:
            batch, self._outgoing = self._outgoing, []
            self.runner.send_message("rig_records", batch)

    def _send_records_periodically(self) -> None:
        while not self._finished:
            gevent.sleep(_RECORD_BATCH_S)
            if not self._finished:
                self._send_records()

    # --- master side ---------------------------------------------------------------------------

    def _on_need(self, msg: Any, **_: Any) -> None:
        if msg.data["sha"] != self.workload.sha256:
            logging.error("error: a worker built a different workload (check its options and files)")
            self.environment.process_exit_code = 2
            gevent.spawn(self.runner.quit)
            return
        ids = [self._queue.popleft() for _ in range(min(msg.data["n"], len(self._queue)))]
        if ids:
            self._busy_workers.add(msg.node_id)
        self.runner.send_message("rig_work", {"ids": ids}, client_id=msg.node_id)

    def _on_records(self, msg: Any, **_: Any) -> None:
        for row in msg.data:
            self.on_record(RequestRecord.from_json(row))

    def _watch_workers(self) -> None:
        """A worker that leaves while it holds requests takes them with it, so the workload can no
        longer be exact: the run stops as interrupted (records kept, no row) instead of waiting
        for records that will never come. One that went missing (no heartbeat for ~3 s: a host
        or network lost) is an error, exit 2; one that quit (Ctrl-C) is an interruption."""
        while not self._finished:
            gevent.sleep(_WATCH_WORKERS_S)
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
