"""One in-process run: the fixed workload through an engine library, recorded as a server run is.

The rig builds the same workload as a server run (loadtest/workload/: same prompts,
same order, same workload_sha256), starts the engine's worker in the engine's venv
(loadtest/inprocess/worker.py; pinned to the engine's cores as a local server is), and turns
each JSON line it sends into a RequestRecord (loadtest/results/record.py): written to
requests.jsonl as it arrives, summarized (loadtest/results/summary.py), checked, judged and
added to runs.csv (loadtest/results/files.py) with `mode` = `in-process`, `host` =
`in-process`, `users` = the batch size and `api` = `in-process`.

Batch B means what B users mean to a server where the engine allows it: vLLM offline keeps B
requests in flight (closed loop); transformers and CTranslate2 run waves of B (static batches,
as their APIs batch); llama-cpp-python runs one at a time.
"""

from __future__ import annotations

import json
import platform
import secrets
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.launch.processes import stop_process_group
from loadtest.workload import WorkloadError, WorkloadOptions, build_workload, load_prompts
from loadtest.cpus import allowed_cpus, cpu_model, cpu_set, format_cpus
from loadtest.inprocess.engines import InprocEngine
from loadtest.toolkit.repo import REPO
from loadtest.results.checks import WARNINGS, check_run
from loadtest.results.files import (RecordWriter, ResultsError, append_run_row, check_runs_file,
                                    write_json)
from loadtest.results.record import RequestRecord
from loadtest.results.redact import redact
from loadtest.results.summary import summarize
from loadtest.results.verdict import REASONS, judge
from loadtest.results.version import rig_version

__all__ = ["InprocError", "InprocRun", "run_inprocess"]


class InprocError(RuntimeError):
    """The run could not happen (engine missing, worker failed); the message is one line."""


@dataclass(frozen=True)
class InprocRun:
    engine: InprocEngine
    variant: str
    options: dict[str, Any]
    flags: str
    batch: int = 1
    requests: int = 18  # per run; at batch B, at least `min_requests_per_batch` x B
    min_requests_per_batch: int = 0
    batches: tuple[int, ...] = ()  # several batch sizes, one after another (default: batch)
    prompts: str = "mixed"
    max_tokens: int = 200
    warmup_requests: int = 2
    out: Path = Path("results")
    tag: str = ""
    repeat: int = 1  # the first repeat's number
    repeats: int = 1  # runs, one after another in one worker
    gpu: str = ""
    engine_cpus: str = ""  # "" = not pinned
    timeout_s: float = 1800
    source: WorkloadOptions | None = None  # --workload and its options (None: the prompt set)

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return self.batches or (self.batch,)

    def requests_at(self, batch: int) -> int:
        return max(self.requests, self.min_requests_per_batch * batch)


def _is_prompt_set(run: InprocRun) -> bool:
    return run.source is None or run.source.source == "prompts"


def _requests(workload: Any, run: InprocRun) -> list[dict[str, Any]]:
    """The worker's requests: each prompt text and output length, as the server run's bodies
    hold them (the same workload, built by loadtest/workload/)."""
    if _is_prompt_set(run):
        prompts = load_prompts(run.prompts)
        return [{"request_id": i, "prompt_id": prompts[i % len(prompts)].id,
                 "text": prompts[i % len(prompts)].text,
                 "max_tokens": prompts[i % len(prompts)].max_tokens or run.max_tokens}
                for i in range(len(workload.specs))]
    bodies = (json.loads(spec.body) for spec in workload.specs)
    return [{"request_id": i, "prompt_id": spec.prompt_id, "text": body["prompt"],
             "max_tokens": body["max_tokens"]}
            for i, (spec, body) in enumerate(zip(workload.specs, bodies))]


def run_inprocess(run: InprocRun, quiet: bool = False) -> list[dict[str, Any]]:
    """Run it `run.repeats` times in one worker (the engine loaded and warmed up once), write
    each repeat's files and runs.csv row; returns the rows. InprocError when it could not run
    (a repeat already finished keeps its row)."""
    engine = run.engine
    if any(b > 1 for b in run.batch_sizes) and not engine.batches:
        raise InprocError(f"{engine.slug} runs one sequence at a time: --batch 1 only")
    model_dir = engine.model if engine.model.is_dir() else engine.model.parent / engine.model.stem
    if run.source is not None and run.source.source == "structured":
        raise InprocError("in-process runs send prompt texts: a structured workload (constrained "
                          "chat answers) needs a server run (rig run --api chat)")
    # The user's files first (prompts, results folder), then the install: a tokenizer that is
    # missing with its model is the install's fault.
    why = engine.missing()
    try:
        check_runs_file(run.out / "runs.csv")  # one a new row would corrupt: refused before
        workloads = {b: build_workload(run.prompts, run.requests_at(b), api="completions",
                                       model="-", max_tokens=run.max_tokens, ignore_eos=True,
                                       temperature=0.0, source=run.source,
                                       model_dir=str(model_dir)) for b in run.batch_sizes}
    except (WorkloadError, ResultsError) as exc:
        tokenizer_missing = (not _is_prompt_set(run) and isinstance(exc, WorkloadError)
                             and not model_dir.exists())
        raise InprocError(why if why and tokenizer_missing else str(exc)) from None
    if why:
        raise InprocError(why)
    largest = workloads[max(run.batch_sizes, key=run.requests_at)]
    if largest.sessions or largest.schedule_ns is not None:
        raise InprocError("in-process runs send single requests back to back: conversation "
                          "and trace workloads need a server run (locust -f loadtest/engines.py)")
    requests = _requests(largest, run)
    # Rounds: `repeats` runs at each batch size; before the first of each size a warm-up of
    # the workload's first prompts (a full batch at least), never recorded.
    rounds = []
    for batch in run.batch_sizes:
        count = max(run.warmup_requests, batch) if run.warmup_requests else 0
        warmup = [dict(requests[i % len(requests)], request_id=-1 - i) for i in range(count)]
        for repeat in range(run.repeats):
            size = run.requests_at(batch)
            rounds.append({"batch": batch, "warmup": [] if repeat else warmup,
                           "requests": requests[:size]})
    threads = len(cpu_set(run.engine_cpus)) if run.engine_cpus else 0
    job = {"adapter": engine.adapter, "model": str(engine.model), "options": run.options,
           "threads": threads, "rounds": rounds}
    digest = model_dir / "model_sha256.txt"
    base: dict[str, Any] = {
        "engine": engine.slug, "mode": "in-process", "model": model_dir.name, "host": "in-process",
        # the cores first, as a local server's runs record them (scripts/demo.sh, latency.sh)
        "flags": redact(" ".join(filter(None, [f"--cpus {run.engine_cpus}" if run.engine_cpus
                                               else "", run.flags]))),
        "gpu": run.gpu, "processes": 1, "prompts": run.prompts, "api": "in-process",
        "max_tokens": run.max_tokens,
        "ignore_eos": True, "temperature": 0.0, "tag": redact(run.tag), "warmup": False,
        "engine_cpus": run.engine_cpus,
        "rig_version": rig_version(), "python_version": platform.python_version(),
        "client_hostname": socket.gethostname(), "client_cpu_model": cpu_model(),
        "client_cpu_count": len(allowed_cpus()),
        "client_cpus": run.engine_cpus or format_cpus(allowed_cpus()),
    }
    if digest.is_file():
        base["model_sha256"] = digest.read_text().strip()
    state = _Rounds(run, base, rounds, workloads, quiet)
    state.open()
    _drive(run, job, state, quiet)
    return state.rows


class _Rounds:
    """The repeats of one worker: each its own run (run_id, folder, records, runs.csv row)."""

    def __init__(self, run: InprocRun, base: dict[str, Any], plan: list[dict[str, Any]],
                 workloads: dict[int, Any], quiet: bool) -> None:
        self.run, self.base, self.plan, self.workloads, self.quiet = run, base, plan, workloads, quiet
        self.rows: list[dict[str, Any]] = []
        self.loaded: dict[str, Any] = {}
        self.meta: dict[str, Any] = {}
        self.records: list[RequestRecord] = []
        self.writer: RecordWriter | None = None

    @property
    def run_dir(self) -> Path:
        return Path(self.meta["run_dir"])

    def open(self) -> None:
        now = time.gmtime()
        plan = self.plan[len(self.rows)]
        batch, workload = plan["batch"], self.workloads[plan["batch"]]
        run_id = (f"{time.strftime('%Y%m%dT%H%M%SZ', now)}-{self.base['engine']}-b{batch}"
                  f"-{secrets.token_hex(2)}")
        run_dir = self.run.out / "runs" / run_id
        repeat = self.run.repeat + sum(1 for p in self.plan[:len(self.rows)] if p["batch"] == batch)
        self.meta = {"timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", now), "run_id": run_id,
                     **self.base, "users": batch, "requests": len(plan["requests"]),
                     "workload": workload.name, "workload_sha256": workload.sha256,
                     "workload_source": workload.source, **workload.columns,
                     "warmup_requests": len(plan["warmup"]), "repeat": repeat,
                     "run_dir": str(run_dir)}
        self.records = []
        try:
            write_json(run_dir / "run.json", {**self.meta, "status": "running"})
            self.writer = RecordWriter(run_dir / "requests.jsonl", run_id)
        except OSError as exc:
            raise InprocError(f"cannot write the run's files in {run_dir} "
                              f"({exc.strerror or exc})") from None

    def add(self, record: RequestRecord) -> None:
        self.records.append(record)
        assert self.writer is not None
        self.writer.write(record)

    def close(self) -> None:
        """The round is over: summary, verdict, run.json and the runs.csv row."""
        assert self.writer is not None
        self.writer.close()
        self.writer = None
        if len(self.records) != self.meta["requests"]:
            raise InprocError(f"{self.base['engine']}: a round ended after {len(self.records)} "
                              f"of {self.meta['requests']} requests")
        row = {**self.meta, "engine_version": self.loaded.get("engine_version", ""),
               "engine_load_s": self.loaded.get("load_s"),
               "engine_settings": json.dumps(self.loaded.get("settings", {}), sort_keys=True),
               "engine_warmup_s": self.loaded.get("engine_warmup_s"), **summarize(self.records)}
        row["warnings"] = check_run(row)
        row["verdict"], reasons = judge(row)
        row["verdict_reasons"] = ";".join(reasons)
        try:
            write_json(self.run_dir / "run.json", {**row, "status": "complete"})
            append_run_row(self.run.out / "runs.csv", row)
        except (OSError, ResultsError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise InprocError(f"the run's results could not be saved ({reason}); its records "
                              f"are in {self.run_dir}") from None
        self.rows.append(row)
        if not self.quiet:
            _print_summary(row)
        if len(self.rows) < len(self.plan):
            self.open()


def _drive(run: InprocRun, job: dict[str, Any], rounds: _Rounds, quiet: bool) -> None:
    """Start the worker, read its events until it is done; InprocError when it fails, misses
    requests, or outlasts --timeout."""
    from loadtest.local_engine import stop_group  # the watchdog: from its own thread

    engine = run.engine
    pin = ["taskset", "-c", run.engine_cpus] if run.engine_cpus else []
    cmd = [*pin, str(engine.python), "-m", "loadtest.inprocess.worker"]
    log_path = rounds.run_dir / "worker.log"
    error, missing = "", False
    with log_path.open("wb") as log:
        process = subprocess.Popen(cmd, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=log, env=engine.environment(run.engine_cpus),
                                   start_new_session=True)
        expired = threading.Event()
        watchdog = threading.Timer(run.timeout_s, lambda: (expired.set(), stop_group(process.pid)))
        watchdog.daemon = True
        watchdog.start()
        try:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(json.dumps(job).encode())
            process.stdin.close()
            for line in process.stdout:
                try:
                    event = json.loads(line)
                    kind = event.pop("event")
                except (ValueError, AttributeError, KeyError):
                    error = f"the worker wrote a line that is not an event: {line[:80]!r}"
                    break
                if kind == "record":
                    rounds.add(RequestRecord.from_json(event))
                elif kind == "round":
                    rounds.close()
                elif kind == "loaded":
                    rounds.loaded.update(event)
                    if not quiet:
                        print(f"{engine.slug} loaded in {event['load_s']:.1f} s "
                              f"({event['engine_version']})", file=sys.stderr)
                elif kind == "warmup":
                    rounds.loaded["engine_warmup_s"] = event["seconds"]
                elif kind == "error":
                    error, missing = event["message"], event.get("kind") == "missing"
        except BrokenPipeError:
            pass  # the worker died before reading its job: its exit is reported below
        finally:
            watchdog.cancel()
            _stop(process, grace_s=0 if sys.exc_info()[0] else 60)  # Ctrl-C: no waiting
    if expired.is_set():
        error = f"stopped after --timeout {run.timeout_s:.0f} s"
    elif not error and process.returncode:
        error = f"the worker exited with {process.returncode}"
    if missing:
        raise InprocError(error)  # an install step to name: one line, no log to read
    if error or len(rounds.rows) != len(rounds.plan):
        why = error or f"the worker ended after {len(rounds.rows)} of {len(rounds.plan)} runs"
        raise InprocError(f"{engine.slug}: {why} (log: {log_path})")


def _stop(process: subprocess.Popen[bytes], grace_s: float) -> None:
    """The worker's whole process group (vLLM's engine core is a child of it), once the worker
    has had `grace_s` to exit by itself: SIGTERM, then SIGKILL what is left after 20 s."""
    if grace_s:
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    stop_process_group(process, grace_s=20.0, kill_wait_s=5.0)


def _print_summary(row: dict[str, Any]) -> None:
    def fmt(value: Any, digits: int = 1) -> str:
        return "-" if value is None else f"{value:,.{digits}f}"

    print(f"\n== llm-load-rig: {row['engine']} {row['flags']} | in-process | batch {row['users']} ==",
          file=sys.stderr)
    print(f"verdict: {row['verdict'].upper()}"
          + "".join(f"\n  - {n}: {REASONS[n]}" for n in row["verdict_reasons"].split(";") if n),
          file=sys.stderr)
    print(f"requests {row['completed']}/{row['requests']} ok | completion "
          f"{fmt(row['completion_time_s'], 2)} s | output {row['output_tokens']} tokens (engine) | "
          f"{fmt(row['output_tok_per_s'])} tok/s", file=sys.stderr)
    for metric in ("ttft", "itl", "e2e"):
        print(f"{metric:>4} ms  p50 {fmt(row[f'{metric}_p50_ms'])}  p90 {fmt(row[f'{metric}_p90_ms'])}"
              f"  p99 {fmt(row[f'{metric}_p99_ms'])}  mean {fmt(row[f'{metric}_mean_ms'])}",
              file=sys.stderr)
    print(f"results {row['run_dir']}", file=sys.stderr)
    for name in row["warnings"]:
        print(f"warning: {name}: {WARNINGS[name]}", file=sys.stderr)
