"""One measured run in one Locust process: its workload, dispatcher, records and files.

The master (or the only process) owns the files and the summary; workers only send.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import secrets
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from locust.runners import WorkerRunner

from loadtest.results.checks import WARNINGS, check_run, error_remedies
from loadtest.client.bounds import bounds_columns, flaw_columns, run_bounds
from loadtest.client.client_cpu import CpuSampler
from loadtest.client.conversation import Sessions, TurnOptions
from loadtest.client.dispatch import Dispatcher
from loadtest.client.engine_cpu import EngineProcessCpu
from loadtest.client.loop_lag import LoopLag
from loadtest.client.runqueue import EngineRunQueueWait
from loadtest.cpus import allowed_cpus, cpu_set, format_cpus
from loadtest.local_engine import started_engine_at, started_flags
from loadtest.client.timing import print_window, timing_from_options
from loadtest.results.metadata import collect_client_metadata, collect_model_metadata, collect_rig_metadata
from loadtest.client.options import RunConfig, users_of
from loadtest.client.run_options import run_options
from loadtest.client.probe import EngineInfo
from loadtest.results.record import RequestRecord
from loadtest.results.equivalence import OUTPUTS_FILE, write_outputs
from loadtest.results.goodput import goodput
from loadtest.results.recount import recount
from loadtest.results.redact import redact_url
from loadtest.results.files import RecordWriter, ResultsError, append_run_row, write_json
from loadtest.results.summary import summarize, worker_send_lags
from loadtest.client.asked_lengths import asked_length_columns
from loadtest.client.targets import dialect_for
from loadtest.telemetry import Telemetry, start_telemetry
from loadtest.telemetry.gauges import request_spans
from loadtest.telemetry.output_counter import counted_by_engine, read_output_counter
from loadtest.calibration.limits import faithful_event_rate
from loadtest.results.verdict import REASONS, judge
from loadtest.workload import build_workload, resolve_prompts, workload_options
from loadtest.workload.agentic import agent_figures
from loadtest.workload.lora import adapter_figures
from loadtest.workload.answers import answer_columns
from loadtest.workload.usage import prompt_token_columns
from servers.prefix_cache import reset_prefix_cache
from servers.registry import SPECS

__all__ = ["Run", "WORST_PROCESS_COLUMNS", "engine_process_cpu_at", "recorded_flags",
           "workers_section", "worst_process"]

log = logging.getLogger("llm-load-rig")


# How each load-generator process kept up; with workers, the worst process speaks for the run.
WORST_PROCESS_COLUMNS = ("client_cpu_max_pct", "client_cpu_mean_pct", "loop_lag_p99_ms",
                         "loop_lag_max_ms",
                         "client_runqueue_wait_ms", "client_runqueue_wait_pct",
                         "clock_sync_error_ms")


def worst_process(own: dict[str, Any], workers: list[dict[str, Any]]) -> dict[str, Any]:
    """This process's client figures, each of WORST_PROCESS_COLUMNS raised to the worst worker's
    (a figure no process measured stays empty, not 0)."""
    merged = dict(own)
    for column in WORST_PROCESS_COLUMNS:
        values = [v for v in (own.get(column), *(w.get(column) for w in workers)) if v is not None]
        merged[column] = max(values) if values else None
    return merged


def workers_section(records: list[RequestRecord],
                    reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """run.json's `workers`: per worker (Locust's worker index, record.worker), the cores it
    ran on (one of its own where the client had a core a process), the clock offset
    it measured against the master at its start and that offset's error, and in open loop its
    own send lag p50/p99. Empty in one process."""
    if not reports:
        return []
    lags = {w["worker"]: w for w in worker_send_lags(records)}
    counts = Counter(r.worker for r in records)
    out = []
    for report in sorted(reports, key=lambda r: r.get("worker", -1)):
        index = report.get("worker")
        lag = lags.get(index, {})
        out.append({"worker": index,
                    "cpus": report.get("cpus"),
                    "records": counts[index],
                    "clock_offset_ms": report.get("clock_offset_ms"),
                    "clock_sync_error_ms": report.get("clock_sync_error_ms"),
                    "send_lag_p50_ms": lag.get("send_lag_p50_ms"),
                    "send_lag_p99_ms": lag.get("send_lag_p99_ms")})
    return out


def engine_runqueue_at(url: str) -> EngineRunQueueWait | None:
    """The run-queue wait of the engine the rig started at ``url`` on this host, else None."""
    engine = started_engine_at(url)
    if engine is None:
        return None
    pid = int(engine["pid"])
    if engine.get("cpus"):
        cores = len(cpu_set(engine["cpus"]))
    else:
        try:
            cores = len(os.sched_getaffinity(pid))
        except OSError:
            cores = os.cpu_count() or 1
    return EngineRunQueueWait(pid, cores)


def engine_process_cpu_at(url: str, behind: tuple[str, ...] = ()) -> EngineProcessCpu | None:
    """Each process's CPU in the engine the rig started at ``url`` on this host, or in every
    replica behind the balancer there (``behind``: their own URLs); None unless the rig
    started it, or each of them, here."""
    direct = started_engine_at(url)
    engines = {url: direct} if direct is not None else {u: started_engine_at(u) for u in behind}
    if not engines or any(e is None for e in engines.values()):
        return None
    slugs = {str(e["engine"]) for e in engines.values() if e is not None}
    front_ends = tuple(part for slug in sorted(slugs) for part in _front_ends(slug))
    return EngineProcessCpu({u: int(e["pid"]) for u, e in engines.items()},  # type: ignore[index]
                            front_ends=front_ends)


def _front_ends(slug: str) -> tuple[str, ...]:
    """The API-server process names of the engine the rig starts as ``slug`` (its recipe's)."""
    spec = SPECS.get(slug)
    return spec.local.front_ends if spec is not None and spec.local is not None else ()


def recorded_flags(config: RunConfig) -> dict[str, str]:
    """The row's `flags` and where they came from: --flags as told (always first), else those
    the rig started its engine at --host (or the replicas behind it) with on this host, else
    none."""
    if config.flags is not None:
        return {"flags": config.flags, "flags_from": "--flags"}
    found = started_flags(config.url, config.engine_urls)
    if found is None:
        return {"flags": "", "flags_from": ""}
    return {"flags": found, "flags_from": "started engine"}


class Run:
    def __init__(self, environment: Any, config: RunConfig, info: EngineInfo) -> None:
        self.environment = environment
        self.config = config
        self.info = info
        self.options = run_options(environment.parsed_options)
        self.timing = timing_from_options(environment.parsed_options)
        self.workload = build_workload(config.prompts, config.requests, api=config.api,
                                       model=config.model or info.model,
                                       max_tokens=config.max_tokens, ignore_eos=config.ignore_eos,
                                       temperature=config.temperature,
                                       ignore_eos_as=config.target.ignore_eos_as,
                                       token_ids=((config.recount or self.options.keep_outputs)
                                                  and config.target.token_ids),
                                       source=workload_options(environment.parsed_options),
                                       model_dir=self.model_dir,
                                       regex_as=config.target.regex_as,
                                       lora_as=config.target.lora_as)
        self.bounds = run_bounds(self.options.request_deadline_s, config.read_timeout_s)
        dialect = dialect_for(config.api)
        self.parse_line = (dialect.parse_line if config.target.empty_chunk_is_token
                           else functools.partial(dialect.parse_line, empty_chunk_is_token=False))
        self.tokens_source: str = dialect.TOKENS_SOURCE
        self.headers = config.headers()
        self.request_name = f"{config.engine}:{self.workload.name}"
        self.records: list[RequestRecord] = []
        self.cpu = CpuSampler()
        self.loop_lag = LoopLag()
        open_loop = self.options.open_loop
        self.timed_schedule_ns = self.timing.schedule_ns(open_loop)  # timed open loop, rate stages
        self.dispatcher = Dispatcher(
            environment, self.workload, self._on_record, self.finish,
            worker_report=self._worker_report, cpu_pct=lambda: self.cpu.last_pct,
            # a trace's timestamps are its schedule (--rate is refused beside a trace)
            schedule_ns=self.workload.schedule_ns or self.timed_schedule_ns or (
                open_loop.offsets_ns(config.requests) if open_loop else None),
            schedule_sha=open_loop.digest(config.requests) if open_loop else "",
            units=self._sessions(), duration_s=self.timing.duration_s,
            shaped=bool(self.timing.stages))
        self.run_id = ""
        self.run_dir = Path()
        self._writer: RecordWriter | None = None
        self._meta: dict[str, Any] = {}
        self._finished = False
        self.started = False  # start() ran: the web UI's next Start needs a new Run
        self.worker_index = 0
        self.telemetry: Telemetry | None = None
        self.output_counter_before: float | None = None
        self.prefix_cache_reset = ""  # what start() did to the engine's prefix cache
        self.engine_runqueue: EngineRunQueueWait | None = None  # an engine the rig started here
        self.engine_cpu: EngineProcessCpu | None = None  # its processes (each replica's), here
        # called at the end, before the summary: a live view's last words (the locustfile
        # registers the console's progress line here; the client never imports the live view)
        self.before_summary: list[Callable[[], None]] = []
        self.row: dict[str, Any] | None = None  # the row and its status, once finished

    def _sessions(self) -> Sessions | None:
        """A conversation workload's sessions as the dispatcher hands them out; None otherwise."""
        sessions = getattr(self.workload, "sessions", None)
        if not sessions:
            return None
        c = self.config
        return Sessions(sessions, TurnOptions(
            c.model or self.info.model, self.info.max_model_len, ignore_eos=c.ignore_eos,
            temperature=c.temperature, ignore_eos_as=c.target.ignore_eos_as,
            token_ids=bool((c.recount or self.options.keep_outputs) and c.target.token_ids),
            keep_outputs=self.options.keep_outputs), c.api)

    @property
    def keep_text(self) -> bool:
        """Answers' text is kept in memory: --keep-outputs, or for their checks."""
        return self.options.keep_outputs or self.workload.answers is not None

    def check_answer(self, record: RequestRecord) -> None:
        """A constrained answer's check (loadtest/workload/answers.py), in the process that read
        it, before its record is counted."""
        if self.workload.answers is not None:
            self.workload.answers.check(record, keep_text=self.options.keep_outputs)

    @property
    def model_dir(self) -> str:
        """Where the served model lives, when it is a local folder (vLLM's /v1/models "root")."""
        return self.info.model_root or self.config.model or self.info.model

    @property
    def owns_files(self) -> bool:
        return not isinstance(self.environment.runner, WorkerRunner)

    def start(self) -> None:
        # Read once here (a worker's index is set before test_start), not per request.
        self.worker_index = max(getattr(self.environment.runner, "worker_index", 0), 0)
        self.started = True
        self.cpu.start()
        self.loop_lag.start()
        if not self.owns_files:
            return
        # Before the run's clock: its prefix-cache hits are then its own. A failed reset is
        # said in the row (and warned about), never a reason to stop.
        self.prefix_cache_reset = self._reset_prefix_caches()
        if self.prefix_cache_reset.startswith("failed"):
            log.warning("warning: the engine's prefix cache was not emptied (%s)",
                        self.prefix_cache_reset)
        users = users_of(self.environment.parsed_options)
        now = time.gmtime()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", now)
        self.run_id = (f"{time.strftime('%Y%m%dT%H%M%SZ', now)}-{self.config.engine}-u{users}"
                       f"-{secrets.token_hex(2)}")
        self.run_dir = self.config.out / "runs" / self.run_id
        self._meta = self._metadata(users, stamp)
        try:
            write_json(self.run_dir / "run.json", {**self._meta, "status": "running"})
            self._writer = RecordWriter(self.run_dir / "requests.jsonl", self.run_id)
        except OSError as exc:
            self._finished = True  # nothing to save at the end
            raise ResultsError(f"cannot write the run's files in {self.run_dir} "
                               f"({exc.strerror or exc})") from None
        self.output_counter_before = self._engine_output_tokens()
        if self.config.telemetry_interval_s > 0:
            self.telemetry = start_telemetry(self.run_dir, self.config.engine, self.config.url,
                                             self.config.gpu, self.config.telemetry_interval_s,
                                             engine_urls=self.config.engine_urls)
            self.telemetry.wait_ready()  # test_start waits, so users spawn after this
        self.engine_runqueue = engine_runqueue_at(self.config.url)
        if self.engine_runqueue is not None:
            self.engine_runqueue.start()
        self.engine_cpu = engine_process_cpu_at(self.config.url, self.config.engine_urls)
        if self.engine_cpu is not None:
            self.engine_cpu.start()
        amount = (f"{self.timing.duration_s:g} s" if self.timing.duration_s is not None
                  else f"{self.config.requests} requests")
        log.info("run %s: %s to %s, results in %s", self.run_id, amount,
                 redact_url(self.config.url), self.run_dir)

    def _reset_prefix_caches(self) -> str:
        """Empty the engine's prefix cache (each replica's behind a balancer): what was done, or
        the first failure, which the row and a warning then say."""
        spec, endpoints = SPECS[self.config.engine], self.config.engine_endpoints
        said = [reset_prefix_cache(url, spec, self.headers) for url in endpoints]
        if len(said) == 1:
            return said[0]
        failed = [s for s in said if s.startswith("failed")]
        return (f"{failed[0]} (on one of {len(said)} replicas)" if failed
                else f"{said[0]} (each of {len(said)} replicas)")

    def _engine_output_tokens(self) -> float | None:
        """The engine's generated-token counter now, summed over its replicas; None where one
        cannot be read."""
        counts = [read_output_counter(url, self.config.target) for url in self.config.engine_endpoints]
        return None if any(c is None for c in counts) else sum(counts)  # type: ignore[arg-type]

    def _metadata(self, users: int, stamp: str) -> dict[str, Any]:
        c = self.config
        processes = max(getattr(self.environment.runner, "worker_count", 0), 1)
        return {
            "timestamp": stamp, "run_id": self.run_id, "engine": c.engine,
            "model": c.model or self.info.model, "host": redact_url(c.url), **recorded_flags(c),
            "gpu": c.gpu,
            "users": users, "requests": c.requests, "workload": self.workload.name,
            "workload_sha256": self.workload.sha256, "workload_source": self.workload.source,
            **self.workload.columns, "prompts": c.prompts, "api": c.api,
            "max_tokens": c.max_tokens, "ignore_eos": c.ignore_eos, "temperature": c.temperature,
            "repeat": c.repeat, "tag": c.tag, "warmup": c.warmup,
            "engine_version": self.info.engine_version,
            "http_read_timeout_s": c.read_timeout_s, "run_dir": str(self.run_dir),
            "prefix_cache_reset": self.prefix_cache_reset,
            "client_pinned_by": getattr(self.environment.parsed_options, "client_pinned_by", ""),
            "engine_cpus": getattr(self.environment.parsed_options, "engine_cpus", ""),
            **self._run_options_metadata(), **self.timing.columns(self.timed_schedule_ns),
            **bounds_columns(self.bounds, c.max_tokens),
            **collect_model_metadata(self.model_dir),
            **collect_rig_metadata(), **collect_client_metadata(processes),
        }

    def _run_options_metadata(self) -> dict[str, Any]:
        o = self.options
        meta: dict[str, Any] = o.open_loop.columns(self.config.requests) if o.open_loop else {}
        if o.slo is not None:
            meta["slo"] = o.slo.text
        meta["keep_outputs"] = o.keep_outputs
        if self.workload.source != "prompts":  # built prompts: their source and tokenizer name them
            meta["prompts_sha256"] = hashlib.sha256((self.workload.sha256 + str(
                self.workload.columns.get("tokenizer_sha256", ""))).encode()).hexdigest()
            return meta
        try:  # names the prompts, so runs of other lengths or engines compare answer by answer
            meta["prompts_sha256"] = hashlib.sha256(
                resolve_prompts(self.config.prompts).read_bytes()).hexdigest()
        except (OSError, ValueError):
            pass
        return meta

    def _client_report(self) -> dict[str, Any]:
        """How this load-generator process kept up: CPU peak and mean, event-loop lag."""
        return {**self.cpu.stop(), **self.loop_lag.stop()}

    def _worker_report(self) -> dict[str, Any]:
        """A worker's: its client report and the cores it ran on (run.json's workers)."""
        return {**self._client_report(), "cpus": format_cpus(allowed_cpus())}

    def _on_record(self, record: RequestRecord) -> None:
        self.records.append(record)
        if self._writer is None:
            return
        try:
            self._writer.write(record)
        except OSError as exc:  # e.g. the disk filled: measuring goes on, in memory
            self._writer = None
            log.error("error: writing %s failed (%s); the run goes on and its summary is kept, "
                      "but its requests.jsonl stops here", self.run_dir / "requests.jsonl",
                      exc.strerror or exc)
            self.environment.process_exit_code = 2

    def finish(self, status: str = "complete") -> None:
        """Summarize and write the run (master/local, once). Only complete, non-warm-up runs
        get a row in runs.csv; an interrupted run keeps its run.json and records."""
        if self._finished or not self.owns_files or not self.run_id:
            return
        self._finished = True
        for hook in self.before_summary:
            hook()
        if self._writer is not None:
            try:
                self._writer.close()
            except OSError:
                pass  # the failed flush was reported when the record was written
        client = worst_process(self._client_report(), self.dispatcher.worker_reports)
        if self.engine_runqueue is not None:
            client.update(self.engine_runqueue.stop())
        engine_processes = None
        if self.engine_cpu is not None:
            columns, engine_processes = self.engine_cpu.stop()
            client.update(columns)
        row = {**self._meta, **summarize(self.records), **client,
               **recount(self.records, self.model_dir, self.config.recount)}
        row.update(counted_by_engine(row, self.output_counter_before,
                                     self._engine_output_tokens()))
        row.update(prompt_token_columns(self.workload, self.records, self.config.api))
        row.update(asked_length_columns(self.workload, self.records, self.config.ignore_eos))
        answers = self.workload.answers
        graded, called = (answers.graded, answers.called) if answers is not None else ((), ())
        row.update(answer_columns(self.records, graded, called))
        row.update(goodput(self.records, row["completion_time_s"], self.options.slo))
        if self.telemetry is not None:
            row.update(self.telemetry.stop(row["output_tokens"], request_spans(self.records)))
        if self.options.keep_outputs:
            try:
                row["outputs_kept"] = write_outputs(self.run_dir / OUTPUTS_FILE, self.records)
            except OSError as exc:
                log.error("error: the outputs could not be saved in %s (%s)", self.run_dir,
                          exc.strerror or exc)
                self.environment.process_exit_code = 2
        row.update(flaw_columns(self.records))
        time_sections = self.timing.figures(self.records, self.dispatcher.run_origin_ns)
        for section, figures in (
                ("adapters", adapter_figures(self.workload, self.records, row["completion_time_s"])),
                ("agents", agent_figures(self.workload.source, self.records,
                                         row["completion_time_s"]))):
            if figures:
                time_sections[section] = figures
        row.update(time_sections.pop("columns"))
        workers = workers_section(self.records, self.dispatcher.worker_reports)
        if workers:
            time_sections["workers"] = workers
        if engine_processes is not None:  # measured: kept even when no process reached 1%
            time_sections["engine_processes"] = engine_processes
        if row["flawed_requests"] and not self.environment.process_exit_code:
            self.environment.process_exit_code = 1  # the engine misanswered: as for failures
        row["warnings"] = check_run(row)
        row["verdict"], reasons = judge(row, faithful_event_rate(processes=row.get("processes")))
        row["verdict_reasons"] = ";".join(reasons)
        _print_summary(row, status)
        print_window(row, time_sections.get("stages", []))
        self._save(row, status, time_sections)
        self.row = {**row, "status": status}

    def _save(self, row: dict[str, Any], status: str, sections: dict[str, Any]) -> None:
        """run.json, then the runs.csv row. A write that fails (a full disk, a runs.csv changed
        during the run) is one error line and exit 2; the records already written stay."""
        try:
            write_json(self.run_dir / "run.json", {**row, **sections, "status": status})
            if status == "complete" and not self.config.warmup:
                append_run_row(self.config.out / "runs.csv", row)
        except (OSError, ResultsError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            log.error("error: the run's results could not be saved (%s); runs.csv is as it was, "
                      "and the requests' records are in %s", reason, self.run_dir)
            self.environment.process_exit_code = 2


def _print_summary(row: dict[str, Any], status: str) -> None:
    def fmt(value: Any, digits: int = 1) -> str:
        return "-" if value is None else f"{value:,.{digits}f}"

    print(f"\n== llm-load-rig: {row['engine']} | {row['users']} users | {status} ==", file=sys.stderr)
    print(f"verdict: {row['verdict'].upper()}"
          + "".join(f"\n  - {name}: {REASONS[name]}" for name in row["verdict_reasons"].split(";") if name),
          file=sys.stderr)
    if row.get("sessions") is not None:
        _print_sessions(row, fmt)
    print(f"{'turns' if row.get('sessions') is not None else 'requests'} {row['completed']}/"
          f"{row.get('turns_sent', row['requests_sent'] if row.get('duration_s') else row['requests'])}"
          f" ok, {row['failed']} failed "
          f"{('(' + row['errors'] + ')') if row['errors'] else ''}", file=sys.stderr)
    for remedy in error_remedies(row["errors"]):
        print(f"  - {remedy}", file=sys.stderr)
    print(f"completion {fmt(row['completion_time_s'], 2)} s | output {row['output_tokens']} tokens "
          f"({row['output_tokens_source']}) | {fmt(row['output_tok_per_s'])} tok/s | "
          f"{fmt(row['req_per_s'], 2)} req/s", file=sys.stderr)
    for metric in ("ttft", "itl", "e2e", *(("ttft_sched", "e2e_sched") if row.get("rate") else ())):
        print(f"{metric:>4} ms  p50 {fmt(row[f'{metric}_p50_ms'])}  p90 {fmt(row[f'{metric}_p90_ms'])}"
              f"  p99 {fmt(row[f'{metric}_p99_ms'])}  mean {fmt(row[f'{metric}_mean_ms'])}",
              file=sys.stderr)
    if row.get("rate"):
        unit = "sessions" if row.get("sessions") is not None else "requests"
        shape = f" (burstiness {row['burstiness']:g})" if row.get("burstiness") else ""
        print(f"open loop {row['rate']:g} {unit}/s {row['arrival']}{shape}: sends lag the schedule "
              f"p50 {fmt(row.get('send_lag_p50_ms'))} / p99 {fmt(row.get('send_lag_p99_ms'))} ms; "
              f"{row.get('capped_requests', 0)} {unit} waited for the --users cap (p99 "
              f"{fmt(row.get('cap_wait_p99_ms'))} ms)", file=sys.stderr)
    if row.get("slo"):
        print(f"slo {row['slo']}: {row['slo_met_requests']}/{row['requests_sent']} requests met "
              f"every target ({fmt(row['slo_met_pct'])}%) | goodput "
              f"{fmt(row['goodput_req_per_s'], 2)} req/s, {fmt(row['goodput_tok_per_s'])} tok/s"
              + (f" | percentiles {row['slo_percentiles']}" if row["slo_percentiles"] else ""),
              file=sys.stderr)
    print(f"client cpu peak {fmt(row.get('client_cpu_max_pct'))}% | event-loop lag p99 "
          f"{fmt(row.get('loop_lag_p99_ms'))} ms | reconnects {row['reconnects']} | engine's own TTFT "
          f"mean {fmt(row.get('engine_ttft_mean_ms'))} ms | results {row['run_dir']}", file=sys.stderr)
    if row.get("engine_process_cpu_max_pct") is not None:
        front_end = row.get("engine_front_end_cpu_max_pct")
        print(f"engine's busiest process: {row['engine_process_cpu_max_name']} "
              f"{fmt(row['engine_process_cpu_max_pct'], 0)}% of a core"
              + (f" | busiest API server {fmt(front_end, 0)}%" if front_end is not None else ""),
              file=sys.stderr)
    if row.get("recount", "off") != "off":
        print(f"recount: {row['recount']}", file=sys.stderr)
    for name in row["warnings"]:
        print(f"warning: {name}: {WARNINGS[name]}", file=sys.stderr)


def _print_sessions(row: dict[str, Any], fmt: Callable[..., str]) -> None:
    """A conversation run: how its sessions ended, and first turns' TTFT against later ones'."""
    print(f"sessions {row['sessions']}/{row['requests']}: {row['sessions_complete']} complete, "
          f"{row['sessions_context_full']} context_full, {row['sessions_failed']} failed | turns "
          f"{row['turns_sent']} sent ({row['context_refused']} refused for length), "
          f"{row['turns_not_sent']} not sent", file=sys.stderr)
    print(f"ttft ms  turn 1 p50 {fmt(row['ttft_turn1_p50_ms'])}  p90 {fmt(row['ttft_turn1_p90_ms'])}"
          f" | later turns p50 {fmt(row['ttft_later_p50_ms'])}  p90 {fmt(row['ttft_later_p90_ms'])}"
          f" | prompt tokens mean {fmt(row['prompt_tokens_turn1_mean'], 0)} -> "
          f"{fmt(row['prompt_tokens_later_mean'], 0)}", file=sys.stderr)
