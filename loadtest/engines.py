"""Locustfile: drive one LLM engine with a fixed workload and record every request exactly.

    locust -f loadtest/engines.py --headless --users 128 --engine vllm --requests 512

Users pull requests from one shared queue (loadtest/client/dispatch.py): exactly --requests are sent
in total, with --processes too, and the run ends by itself when the last response completes.
With --rate (open loop, loadtest/client/arrivals.py) each request is sent at its scheduled time
and --users caps the requests in flight. A conversation workload hands out sessions instead,
each user sending a session's turns one after another (loadtest/client/conversation.py).
Each stream is read line by line and stamped on arrival (loadtest/client/transport.py); percentiles
come from those raw records (loadtest/results/summary.py), not from Locust's rounded buckets, though
Locust's own stats and web UI still show every request (response time = end-to-end); the web
UI also gets an LLM tab, a page of the run's own (/llm) and Prometheus text at /metrics
(loadtest/live/webui.py). Headless, the console shows the run's progress line every 5 s
instead of Locust's periodic tables (loadtest/live/progress.py; --print-stats brings them back).
Results: OUT/runs.csv and OUT/runs/RUN_ID/{run.json,requests.jsonl} (loadtest/results/files.py).
Exit codes: 0 all requests ok, 1 some failed (recorded) or the engine answered some wrongly
(flawed_requests), 2 the rig could not run.
The rig's options: `rig run --help` (Locust prints its --help before it loads a locustfile).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from locust import User, constant, events, task  # import locust first: it monkey-patches
from locust.user.users import LOCUST_STATE_STOPPING
from locust.runners import MasterRunner, WorkerRunner

import gevent
import psutil
from gevent.event import Event

from loadtest.client.options import (ConfigError, config_from_options, engine_urls_of,
                                     ensure_writable, users_of)
from loadtest.client.probe import (EngineInfo, ProbeError, check_prompts_fit, check_request_fits,
                                   probe_engine)
from loadtest.results.record import RequestRecord
from loadtest.results.files import ResultsError, check_runs_file
from loadtest.client.run import Run
from loadtest.client.conversation import Conversation, run_session
from loadtest.live.progress import Progress, take_over_console
from loadtest.live import webui
from loadtest.launch.command import own_master_port
from loadtest.launch.checks import check_locust_parser, check_run_options
from loadtest.launch.options import add_locustfile_options
from loadtest.client.transport import new_client, open_connection, send
from loadtest.workload import WorkloadError
from loadtest.local_engine import pin_client_beside
from loadtest.client.cores import lay_out_client, pin_forked_worker

log = logging.getLogger("llm-load-rig")
_run: Run | None = None  # this process's run (each --processes child has its own)
_progress_s: float | None = None  # a headless master's progress line, instead of Locust's tables


def _refuse(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def _end_forked_workers() -> None:
    """--processes forks the workers before the master checks the options, and Locust's exit
    handler may take a worker still running for one that ended: a master that refuses stops them
    itself, or each waits a minute for its heartbeat. They are not waited for here: that exit
    handler reaps them."""
    for worker in psutil.Process().children():
        worker.terminate()


@events.init_command_line_parser.add_listener
def _add_options(parser: Any) -> None:
    add_locustfile_options(parser)  # the same function builds `rig run --help`, which lists them
    check_locust_parser(parser)  # --host, --users, ... checked as `rig run` checks them
    own_master_port(parser)


@events.init.add_listener
def _prepare(environment: Any, runner: Any, **_: Any) -> None:
    """Master or single process: check every option and the engine before anything is sent."""
    global _run, _progress_s
    if environment.parsed_options is None:
        return
    if isinstance(runner, WorkerRunner):
        _pin(environment, environment.host)
        return
    options = environment.parsed_options
    try:
        _run = _checked_run(environment)
        environment.host = _run.config.url
        lay_out_client(options, _run.config.url, engine_urls_of(getattr(options, "engine_urls", "")))
        _progress_s = take_over_console(options)
    except (ConfigError, ProbeError, ResultsError, WorkloadError) as exc:
        if isinstance(runner, MasterRunner) and options.processes:
            _end_forked_workers()
        _refuse(str(exc))
    options.model = _run.config.model or _run.info.model  # forwarded to workers with the options
    # likewise the tokenizer token-exact workloads were built with, found in the model's folder
    options.tokenizer = options.tokenizer or str(_run.workload.columns.get("tokenizer", ""))
    options.max_model_len = _run.info.max_model_len  # likewise: conversations end at the context
    if options.spawn_rate is None:  # dispatch waits for all users anyway: spawn them at once
        options.spawn_rate = users_of(options)
    if _run.timing.stages:
        _use_stages(environment, runner, _run)
    webui.install(environment, lambda: _run)  # the LLM tab, /llm and /metrics (web UI runs)


def _use_stages(environment: Any, runner: Any, run: Run) -> None:
    """--stages: Locust's load shape runs them, and a user a stage stops ends its request first."""
    from loadtest.client.shape import StagesShape  # here: a shape class at module level is used

    options = environment.parsed_options
    if run.timing.stages[0].users is not None:  # the row's users: the stages' peak
        options.num_users = max(s.users or 0 for s in run.timing.stages)
    environment.shape_class = StagesShape(run.timing.stages, lambda: run.dispatcher.finished,
                                          users_of(options))
    environment.shape_class.runner = runner
    deadline_s, _ = run.bounds.for_request(b'"max_tokens": %d' % run.config.max_tokens)
    environment.stop_timeout = deadline_s + 5.0


def _pin(environment: Any, url: str | None) -> None:
    """A worker: keep off the cores of an engine the rig started on this host (clean by
    default: on a small machine the two starve each other) until the master's layout reaches
    it (_start: a core of its own); the master lays the client out itself (lay_out_client)."""
    options = environment.parsed_options
    if url:  # replicas behind a balancer (--engine-urls) are found by their own ports
        behind = engine_urls_of(getattr(options, "engine_urls", ""))
        options.client_pinned_by = pin_client_beside(url, bool(getattr(options, "no_pin", False)),
                                                     behind)


def _checked_run(environment: Any) -> Run:
    """A new run of the options' workload against environment.host, the engine asked first."""
    config = check_run_options(environment.parsed_options, environment.host)  # refused early
    ensure_writable(config.out)
    check_runs_file(config.out / "runs.csv")
    info = probe_engine(config.url, config.api, config.headers(),
                        pinned_model=config.target.pinned_model)
    if not (config.model or info.model):
        raise ConfigError(f"{config.url} names no model; pass --model")
    if not config.target.hosted:  # a hosted API's list may not name every model it takes
        check_request_fits(info, config.model, config.max_tokens, config.target.pinned_model)
    run = Run(environment, config, info)
    check_prompts_fit(config.url, config.headers(), info, run.workload)
    return run


@events.test_start.add_listener
def _start(environment: Any, **_: Any) -> None:
    global _run
    if isinstance(environment.runner, WorkerRunner):
        options = environment.parsed_options
        pin_forked_worker(options)
        config = config_from_options(options, environment.host)
        max_model_len = getattr(options, "max_model_len", None)  # the master's probe read it
        _run = Run(environment, config, EngineInfo(options.model, "", max_model_len=max_model_len))
    elif _run is not None and _run.started:  # Start pressed again in the web UI: a new run
        try:
            if isinstance(environment.runner, MasterRunner):  # workers dispatch one run each
                raise ConfigError("with workers, each run needs a fresh master and workers")
            _run = _checked_run(environment)  # the web UI may have changed the host
        except (ConfigError, ProbeError, ResultsError, WorkloadError) as exc:
            log.error("error: %s", exc)  # shown in the web UI's log
            gevent.spawn(environment.runner.stop)
            return
    if _run is not None:
        try:
            _run.start()
            if _progress_s and _run.owns_files:
                _run.before_summary.append(Progress(_run, _progress_s).start().close)
        except ResultsError as exc:  # e.g. a full disk: nothing can be recorded
            log.error("error: %s", exc)
            environment.process_exit_code = 2
            gevent.spawn(environment.runner.quit)


@events.spawning_complete.add_listener
def _open_gate(**_: Any) -> None:
    if _run is not None:
        _run.dispatcher.spawning_complete()


@events.quitting.add_listener
def _save_partial(**_: Any) -> None:
    if _run is not None:
        _run.finish(status="interrupted")  # no-op when the run already finished


def _checked_ms(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and 0 <= value < float("inf") else 0.0


def _checked_count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


class LLMUser(User):
    """One client thread: one connection, one request at a time, no think time."""

    wait_time = constant(0)

    def on_start(self) -> None:
        try:
            self._connect()
        finally:
            _run.dispatcher.user_ready()

    def on_stop(self) -> None:
        self.client.close()

    @task
    def send_all(self) -> None:
        """This user's share of the workload, one request after another, then wait for the end.

        One task for the whole run, not one per request: Locust yields (gevent.sleep(0))
        between tasks, so when many answers end in the same instant each user's next request
        would wait for every other user's bookkeeping, spreading the next wave's arrival at the
        engine (measured at the server: docs/measurement.md, "How good the measurer is"). Here a
        user sends its next request first, and the bookkeeping of the last one runs after
        (_account)."""
        run = _run
        assert run is not None
        while (work := run.dispatcher.take()) is not None:
            if isinstance(work, Conversation):  # a session: its turns, each with the answers so far
                run_session(work, lambda spec: self._send(run, spec, keep_text=True),
                            lambda record, last: gevent.spawn(self._account, run, record, last),
                            open_loop=run.options.open_loop is not None)
            else:
                gevent.spawn(self._account, run, self._send(run, work))
            if self._state == LOCUST_STATE_STOPPING:  # a stage has fewer users: leave now
                return
        # Workload used up: wait for the runner to end the run (a user that raises StopUser
        # makes Locust log errors at quit).
        if self.environment.stop_timeout:  # staged: the runner waits for users to leave
            while self._state != LOCUST_STATE_STOPPING:
                gevent.sleep(0.2)
            return
        Event().wait()

    def _send(self, run: Run, spec: Any, keep_text: bool = False) -> RequestRecord:
        record = send(self.client, spec, run.parse_line, run.tokens_source, run.headers,
                      worker=run.worker_index, keep_text=keep_text or run.keep_text,
                      bounds=run.bounds)
        if not record.ok:  # its connection may be mid-stream: start clean
            self.client.close()
            self._connect()
        return record

    def _account(self, run: Run, record: RequestRecord, ends_unit: bool = True) -> None:
        """Locust's statistics get only numbers the rig checked (its own clock's time, a count
        the dialect validated); the record is completed even if a listener raises, so the run
        still ends."""
        try:
            run.check_answer(record)
            if not record.context_refused:  # a session's end, neither served nor failed
                self.environment.events.request.fire(
                    request_type=run.config.api, name=run.request_name,
                    response_time=_checked_ms(record.e2e_ms),
                    response_length=_checked_count(record.output_tokens), context={},
                    exception=None if record.ok else RuntimeError(
                        f"{record.error_kind}: {(record.error or '')[:200]}"))
        finally:
            run.dispatcher.complete(record, ends_unit)

    def _connect(self) -> None:
        """A fresh client with its connection already open (off the clock)."""
        assert _run is not None
        self.client = new_client(_run.config.url, read_timeout_s=_run.config.read_timeout_s)
        open_connection(self.client)
