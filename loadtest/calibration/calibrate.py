"""Calibrate the measurer: how much streamed load this client measures faithfully.

    python -m loadtest.calibration.calibrate [--users 1,32,128,512] [--processes 1,2,4,8]
        [--requests 8] [--ttft-ms 50] [--gap-ms 20] [--tokens 64] [--out results/calibration]
        [--quick] [--python PY] [--pacer-cores 0] [--client-cores 1] [--pacer-workers N]
        [--worker-hosts 1,2,4 [--cores-per-host 1]]

Starts the pacing server (pacer.py: tokens on an exact schedule) pinned to its own cores, then,
for each client process count and user count per process, runs the real rig (Locust, `--engine vllm`
pointed at the pacer) pinned to the other cores, and compares what the rig recorded
(OUT/runs.csv, requests.jsonl: sent_ns, first_chunk_ns, chunk_gaps_ns) with what the pacer
actually wrote (its /requests log: read and write stamps on the same CLOCK_MONOTONIC), request
by request (each prompt is unique, so each record finds its answer):

- TTFT error = measured TTFT - the pacer's own (first write - request read): what the client
  and the loopback added, net of the server's lateness; gross = measured - --ttft-ms;
- ITL error = each measured gap - the pacer's actual gap between the same two writes;
- delivery = arrival stamp - write stamp, per token (the same clock on one host);
- events/s per process = output chunks / completion time / client processes (limits.events_per_s);
- client CPU peak and event-loop lag p99 = the run row's client_cpu_max_pct, loop_lag_p99_ms
  (a client that is starved by other processes lags with little CPU of its own).
A setting is faithful when the size of both errors is within 1 ms at p50 and 2 ms at p99 (the
table shows ITL's size: a late token makes one gap long and the next short) and every request
succeeded; per process count, the limit is the highest events/s per process measured faithfully.
A setting where the pacer itself ran late (lateness p99 over 2 ms) and the client was not
faithful is inconclusive ("?"), since the pacer's late reads land in the client's TTFT error.

With --worker-hosts N,M..., the client runs as a Locust master and N workers instead, each on a
host of its own (a network namespace on one bridge: hosts.py; root only), the pacer on another:
the master on the first client core, each worker host on --cores-per-host cores of its own (one
Locust process a core). --users then counts users per worker host. It shows how the faithful
load grows with hosts: per host count, the most events/s in all among settings judged faithful.

Writes OUT/<hostname>-<ncpu>cpu.json (the limits and the table; limits.py reads it; with
--worker-hosts OUT/<hostname>-<ncpu>cpu-hosts.json, which no run's limit is read from) and keeps
every rig run, pacer log and Locust log in OUT/<hostname>-<ncpu>cpu/<stamp>/.
Locust runs as `PY -m locust` (PY: --python, else $RIG_PYTHON, else this Python), or as the
command in $LOCUST; nothing depends on a virtual environment.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.toolkit.repo import REPO
from loadtest.toolkit.args import RigParser, command_prog
from loadtest.launch import RunSpec, command, run
from loadtest.launch.command import worker_command
from loadtest.launch.processes import stop_process_group
from loadtest.toolkit.types import (cpu_list, duration, positive_int, positive_int_list,
                                    positive_number, writable_folder)
from loadtest.cpus import cpu_model, cpu_set
from loadtest.results.record import RequestRecord
from loadtest.results.files import read_records, write_json
from loadtest.calibration.limits import calibration_path, events_per_s, faithful_limits, headline_limit
from loadtest.calibration.pacer import _percentile
from loadtest.calibration.hosts import Hosts
from loadtest.calibration.server import CalibrationError, Pacer, pacer_env as _env

__all__ = ["main", "analyze", "CRITERION"]

CRITERION = {"p50_ms": 1.0, "p99_ms": 2.0}
_PACER_LATE_P99_MS = 2.0
SCHEMA = 1


# --- options ----------------------------------------------------------------------------------

def _cores(text: str) -> list[int]:
    return sorted(cpu_set(cpu_list(text)))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    rig_parser = parser()
    args = rig_parser.parse_args(argv)
    if args.worker_hosts and args.processes:
        rig_parser.error("--worker-hosts and --processes: give one (a worker host runs "
                         "--cores-per-host processes)")
    if args.cores_per_host is not None and not args.worker_hosts:
        rig_parser.error("--cores-per-host goes with --worker-hosts: add it")
    args.cores_per_host = args.cores_per_host or 1
    args.users = args.users or ([1, 32, 256] if args.quick else [1, 32, 128, 512])
    args.requests = args.requests or (2 if args.quick else 8)
    args.tokens = args.tokens or (32 if args.quick else 64)
    return args


def parser() -> RigParser:
    parser = RigParser(prog=command_prog("python -m loadtest.calibration.calibrate"),
                       description="How much streamed load this client measures faithfully.",
                       epilog="Details: the module's docstring (loadtest/calibration/calibrate.py)."
                              "\n\nexample:\n  rig calibrate --quick")
    parser.add_argument("--users", type=positive_int_list, help="users per client process (default "
                        "1,32,128,512; --quick 1,32,256); total = this x processes")
    parser.add_argument("--processes", type=positive_int_list,
                        help="client process counts (default 1,2,4,8, those that fit the client cores)")
    parser.add_argument("--requests", type=positive_int,
                        help="answers each user streams per setting (total = this x users; "
                             "default 8, --quick 2)")
    parser.add_argument("--ttft-ms", type=positive_number, default=50.0,
                        help="the pacer's time to first token (default 50)")
    parser.add_argument("--gap-ms", type=positive_number, default=20.0,
                        help="the pacer's gap between tokens (default 20)")
    parser.add_argument("--tokens", type=positive_int, help="tokens per answer (default 64, "
                        "--quick 32)")
    parser.add_argument("--api", choices=("completions", "chat", "generate"), default="completions")
    parser.add_argument("--out", type=writable_folder, default=REPO / "results" / "calibration",
                        help="results folder (default results/calibration)")
    parser.add_argument("--quick", action="store_true", help="a smaller run, under a minute")
    parser.add_argument("--python", default="", help="the Python that runs Locust (default "
                        "$RIG_PYTHON, else this one); $LOCUST, a command, overrides both")
    parser.add_argument("--pacer-cores", type=_cores, help="cores for the pacer (default: the "
                        "first third, at least one, when there are 2 or more)")
    parser.add_argument("--client-cores", type=_cores, help="cores for the client (default: the rest)")
    parser.add_argument("--pacer-workers", type=positive_int,
                        help="pacer processes (default: one per pacer core)")
    parser.add_argument("--worker-hosts", type=positive_int_list,
                        help="worker host counts: the client as a master and that many workers, "
                             "each a host of its own (a network namespace; root only) on cores of "
                             "its own; --users then counts users per host")
    parser.add_argument("--cores-per-host", type=positive_int,
                        help="cores (and Locust processes) a worker host gets (default 1)")
    parser.add_argument("--timeout", type=duration, default=600.0,
                        help="how long one setting may take: seconds, or 10m (default 600)")
    return parser


def split_cores(available: list[int], pacer: list[int] | None,
                client: list[int] | None) -> tuple[list[int], list[int]]:
    """Pacer on the first third of the cores (at least one), the client on the rest; one core:
    both share it."""
    if pacer is None and client is None:
        if len(available) < 2:
            return available, available
        count = max(1, len(available) // 3)
        return available[:count], available[count:]
    if pacer is None:
        pacer = [c for c in available if c not in client] or available
    if client is None:
        client = [c for c in available if c not in pacer] or available
    for core in pacer + client:
        if core not in available:
            raise CalibrationError(f"core {core} is not available here (have {_span(available)})")
    return pacer, client


def _span(cores: list[int]) -> str:
    return ",".join(map(str, cores))


# --- one setting ------------------------------------------------------------------------------

def locust_prefix(python: str) -> list[str]:
    """The command that runs Locust: $LOCUST when set, else `PY -m locust`."""
    override = os.environ.get("LOCUST", "").strip()
    return shlex.split(override) if override else [python, "-m", "locust"]


def _check_locust(locust: list[str]) -> None:
    try:
        result = subprocess.run([*locust, "--version"], cwd=REPO, env=_env(), capture_output=True,
                                text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CalibrationError(f"cannot run Locust as {shlex.join(locust)}: {exc}") from None
    if result.returncode != 0:
        last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise CalibrationError(f"cannot run Locust as {shlex.join(locust)}: {last[0]} (set "
                               f"--python, $RIG_PYTHON or $LOCUST)")


@dataclass(frozen=True)
class LocalProcesses:
    """The client as one Locust process, or `--processes COUNT` of them, on the client cores."""
    cores: list[int] | None
    unit = "processes"

    def processes(self, count: int) -> int:
        return count

    def spec(self, count: int, locust: Sequence[str]) -> dict[str, Any]:
        return {"processes": count if count > 1 else None, "locust": tuple(locust),
                "cpus": _span(self.cores) if self.cores else None}

    @contextlib.contextmanager
    def workers(self, count: int, locust: Sequence[str], raw: Path, tag: str) -> Iterator[None]:
        yield  # Locust forks its own


@dataclass(frozen=True)
class WorkerHosts:
    """The client as a master on `master_cores` and workers each on a host of its own, host i on
    `worker_cores[i]` with one Locust process a core."""
    hosts: Hosts
    master_cores: list[int]
    worker_cores: list[list[int]]
    unit = "hosts"

    def processes(self, count: int) -> int:
        return sum(len(cores) for cores in self.worker_cores[:count])

    def spec(self, count: int, locust: Sequence[str]) -> dict[str, Any]:
        return {"locust": (*self.hosts.prefix("master"), *locust), "cpus": _span(self.master_cores),
                "locust_options": ("--master", "--expect-workers", str(self.processes(count)))}

    @contextlib.contextmanager
    def workers(self, count: int, locust: Sequence[str], raw: Path, tag: str) -> Iterator[None]:
        started = []
        try:
            for i, cores in enumerate(self.worker_cores[:count], start=1):
                cmd = worker_command(self.hosts.address("master"), processes=len(cores),
                                     cpus=_span(cores), locust=locust)
                started.append(self.hosts.popen(f"w{i}", cmd, raw / f"worker{i}-{tag}.log", REPO,
                                                env=_env()))
            yield
        finally:
            for process in started:
                stop_process_group(process, grace_s=10)


Placement = LocalProcesses | WorkerHosts


def host_names(count: int) -> list[str]:
    """The hosts `--worker-hosts` makes: the pacer's, the master's, one per worker."""
    return ["engine", "master", *(f"w{i}" for i in range(1, count + 1))]


def host_cores(client: list[int], count: int, per_host: int) -> tuple[list[int], list[list[int]], bool]:
    """The master on the first client core, then `per_host` cores for each of `count` worker
    hosts; cores are reused in turn when there are too few (and the third value says so)."""
    needed = 1 + count * per_host
    cycle = [client[i % len(client)] for i in range(needed)]
    workers = [cycle[1 + i * per_host:1 + (i + 1) * per_host] for i in range(count)]
    return cycle[:1], workers, needed > len(client)


def run_setting(args: argparse.Namespace, pacer: Pacer, locust: list[str], placement: Placement,
                raw: Path, users_per_unit: int, count: int) -> dict[str, Any]:
    """One setting: `count` processes (or worker hosts) of `users_per_unit` users each."""
    users = users_per_unit * count
    processes = placement.processes(count)
    tag = f"{'h' if placement.unit == 'hosts' else 'p'}{count}-u{users}"
    total = users * args.requests
    prompts = raw / f"prompts-{tag}.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"cal-{tag}-{i:06d}", "prompt": f"cal-{tag}-{i:06d}"})
                               + "\n" for i in range(total)))
    spec = RunSpec.of(
        engine="tgi" if args.api == "generate" else "vllm", host=pacer.url, users=users,
        only_summary=True, model="pacer", api=args.api, requests=total, max_tokens=args.tokens,
        prompts=prompts, telemetry_interval=0, out=raw, tag=tag,
        ignore_eos=args.api != "generate", cwd=REPO, environ=(("PYTHONPATH", _env()["PYTHONPATH"]),),
        **placement.spec(count, locust))
    pacer.get("/lateness/reset", method="POST")
    log = raw / f"locust-{tag}.log"
    try:
        with placement.workers(count, locust, raw, tag):
            launched = run(spec, log, args.timeout)
    except FileNotFoundError as exc:
        raise CalibrationError(f"cannot run Locust ({shlex.join(command(spec)[:3])}...): "
                               f"{exc.strerror}") from None
    if launched.exit_code == -1:
        raise CalibrationError(f"setting {tag} ran past --timeout {args.timeout:g} s (log: {log})")
    row = launched.row
    if launched.exit_code not in (0, 1) or row is None:
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
        raise CalibrationError(f"the rig failed at {tag} (exit {launched.exit_code}): "
                               f"{tail[-400:]} (log: {log})")
    lateness = pacer.get("/lateness")
    served = pacer.get("/requests")
    with gzip.open(raw / f"pacer-{tag}.json.gz", "wt") as file:
        json.dump({"lateness": lateness, **served}, file)
    records = read_records(Path(row["run_dir"]) / "requests.jsonl")
    hosts = {"hosts": count} if placement.unit == "hosts" else {}
    return {**hosts, "processes": processes, "users": users, "users_per_process": users // processes,
            "requests": total, "run_id": row["run_id"],
            **analyze(records, served["requests"], args.ttft_ms, args.gap_ms),
            "failed": int(row["failed"] or 0),
            "events_per_s_per_process": events_per_s(row),
            "client_cpu_max_pct": _float(row.get("client_cpu_max_pct")),
            "loop_lag_p99_ms": _float(row.get("loop_lag_p99_ms")),
            "completion_time_s": _float(row.get("completion_time_s")),
            "pacer_lateness_ms": lateness["lateness_ms"],
            "pacer_first_token_lateness_ms": lateness["first_token_lateness_ms"],
            "pacer_gap_error_ms": lateness["gap_error_ms"],
            "pacer_buffered_writes": lateness["buffered_writes"]}


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def analyze(records: list[RequestRecord], served: list[dict[str, Any]], ttft_ms: float,
            gap_ms: float) -> dict[str, Any]:
    """Client records against the pacer's log of the same requests (joined on the prompt)."""
    by_prompt = {entry["prompt"]: entry for entry in served}
    ttft_net, ttft_gross, itl_net, itl_gross, delivery = [], [], [], [], []
    unmatched = 0
    for record in records:
        if not record.ok or record.first_chunk_ns is None:
            continue
        entry = by_prompt.get(record.prompt_id)
        if entry is None or len(entry["write_ns"]) != record.output_chunks:
            unmatched += 1
            continue
        writes = entry["write_ns"]
        measured = record.first_chunk_ns - record.sent_ns
        ttft_net.append(measured - (writes[0] - entry["read_ns"]))
        ttft_gross.append(measured - ttft_ms * 1e6)
        arrival = record.first_chunk_ns
        delivery.append(arrival - writes[0])
        for k, gap in enumerate(record.chunk_gaps_ns, start=1):
            itl_net.append(gap - (writes[k] - writes[k - 1]))
            itl_gross.append(gap - gap_ms * 1e6)
            arrival += gap
            delivery.append(arrival - writes[k])
    return {"matched": len(ttft_net), "unmatched": unmatched,
            "ttft_err_ms": _stats(ttft_net), "ttft_err_gross_ms": _stats(ttft_gross),
            "itl_err_ms": _stats(itl_net), "itl_err_gross_ms": _stats(itl_gross),
            "delivery_ms": _stats(delivery)}


def _stats(values_ns: list[float]) -> dict[str, float | None]:
    """Signed p50/p99/min/max, and p50/p99 of the size of the error (abs_p50, abs_p99): a late
    token makes one gap too long and the next too short, and gaps that collapse (tokens read in
    bunches) have a negative median, so faithfulness is judged on the size."""
    if not values_ns:
        return {"count": 0, "p50": None, "p99": None, "min": None, "max": None, "abs_p50": None,
                "abs_p99": None}
    ordered = sorted(values_ns)
    sizes = sorted(abs(v) for v in values_ns)
    return {"count": len(ordered), "p50": _percentile(ordered, 50) / 1e6,
            "p99": _percentile(ordered, 99) / 1e6, "min": ordered[0] / 1e6,
            "max": ordered[-1] / 1e6, "abs_p50": _percentile(sizes, 50) / 1e6,
            "abs_p99": _percentile(sizes, 99) / 1e6}


def judge(row: dict[str, Any]) -> str:
    """yes | no | ? (the pacer itself was late, and so may have caused the error)."""
    def within(stats: dict[str, Any]) -> bool:
        return (stats["abs_p50"] is not None and stats["abs_p50"] <= CRITERION["p50_ms"]
                and stats["abs_p99"] <= CRITERION["p99_ms"])

    if (row["failed"] == 0 and row["unmatched"] == 0 and row["matched"] == row["requests"]
            and within(row["ttft_err_ms"]) and within(row["itl_err_ms"])):
        return "yes"
    if (row["pacer_lateness_ms"]["p99"] or 0) > _PACER_LATE_P99_MS:
        return "?"
    return "no"


# --- the table --------------------------------------------------------------------------------

_HEAD = ("procs", "users", "events/s/proc", "TTFT err p50/p99", "ITL |err| p50/p99",
         "delivery p50/p99", "pacer late p50/p99", "client cpu", "loop lag p99", "faithful")


def format_table(rows: list[dict[str, Any]]) -> str:
    """One line a setting; rows of worker hosts lead with their host count and events/s in all."""
    def pair(stats: dict[str, Any], prefix: str = "") -> str:
        if stats.get(prefix + "p50") is None:
            return "-"
        return f"{stats[prefix + 'p50']:.2f} / {stats[prefix + 'p99']:.2f}"

    by_hosts = bool(rows) and "hosts" in rows[0]
    head = (("hosts", "events/s") if by_hosts else ()) + _HEAD
    lines = [head]
    for r in rows:
        cpu, lag, rate = r["client_cpu_max_pct"], r["loop_lag_p99_ms"], r["events_per_s_per_process"]
        lead = (str(r["hosts"]), f"{rate * r['processes']:,.0f}" if rate else "-") if by_hosts else ()
        lines.append((*lead, str(r["processes"]), str(r["users"]), f"{rate:,.0f}" if rate else "-",
                      pair(r["ttft_err_ms"]), pair(r["itl_err_ms"], "abs_"), pair(r["delivery_ms"]),
                      pair(r["pacer_lateness_ms"]), "-" if cpu is None else f"{cpu:.0f}%",
                      "-" if lag is None else f"{lag:.1f}",
                      r["faithful"] + (f" ({r['failed']} failed)" if r["failed"] else "")))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["  ".join(cell.rjust(w) for cell, w in zip(line, widths)) for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def faithful_by_hosts(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per worker host count: the most events/s in all among its settings judged faithful (0.0
    when none was)."""
    return faithful_limits(rows, by="hosts", in_all=True)


# --- main -------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return _calibrate(args)
    except CalibrationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


def _calibrate(args: argparse.Namespace) -> int:
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    ncpu = len(available) or os.cpu_count() or 1
    pinning = len(available) >= 2 and shutil.which("taskset") is not None
    pacer_cores, client_cores = (split_cores(available, args.pacer_cores, args.client_cores)
                                 if available else ([], []))
    counts = args.worker_hosts or args.processes or [
        p for p in (1, 2, 4, 8) if p <= max(1, len(client_cores))]
    workers = args.pacer_workers or max(1, len(pacer_cores) if len(available) >= 2 else 1)
    python = args.python or os.environ.get("RIG_PYTHON") or sys.executable
    locust = locust_prefix(python)
    _check_locust(locust)
    host = socket.gethostname()
    out_file = calibration_path(args.out, host, ncpu)
    if args.worker_hosts:
        out_file = out_file.with_name(f"{out_file.stem}-hosts.json")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    raw = args.out / f"{host}-{ncpu}cpu" / stamp
    raw.mkdir(parents=True, exist_ok=True)
    setup = {"ttft_ms": args.ttft_ms, "gap_ms": args.gap_ms, "tokens": args.tokens,
             "requests_per_user": args.requests, "api": args.api,
             "pacer_cores": pacer_cores if pinning else None,
             "client_cores": client_cores if pinning else None, "pacer_workers": workers,
             "locust": shlex.join(locust), "quick": args.quick}
    unit = "worker hosts" if args.worker_hosts else "processes"
    print(f"calibrating {host} ({ncpu} cpu): pacer on cores {_span(pacer_cores) if pinning else 'any'}"
          f" ({workers} worker{'s' if workers > 1 else ''}), client on "
          f"{_span(client_cores) if pinning else 'any'}; {unit} {_span(counts)}, users per "
          f"{'host' if args.worker_hosts else 'process'} {_span(args.users)}, {args.requests} "
          f"answers per user of {args.tokens} tokens ({args.ttft_ms:g} ms TTFT, {args.gap_ms:g} ms "
          f"gap); raw results in {raw}", file=sys.stderr)
    with contextlib.ExitStack() as stack:
        placement, pacer_host = _placement(args, stack, client_cores if pinning else [], counts, setup)
        pacer = Pacer(python, pacer_cores if pinning else None, workers, args, raw / "pacer.log",
                      pacer_host)
        stack.callback(pacer.stop)
        setup["pacer_loop"] = pacer.get("/lateness").get("loop")
        rows: list[dict[str, Any]] = []
        for count in counts:
            for users in args.users:
                row = run_setting(args, pacer, locust, placement, raw, users, count)
                row["faithful"] = judge(row)
                rows.append(row)
                print(format_table([row]).splitlines()[-1], file=sys.stderr)
                _save(out_file, host, ncpu, setup, rows, raw)  # save as we go
    print(format_table(rows))
    if args.worker_hosts:
        for count, total in faithful_by_hosts(rows).items():
            print(f"faithful with {count} worker host{'s' if count != '1' else ''}: "
                  + (f"up to {total:,.0f} events/s in all" if total else "at no tested load"))
    else:
        limits = faithful_limits(rows)
        for count in counts:
            limit = limits.get(str(count))
            print(f"faithful with {count} process{'es' if count > 1 else ''}: "
                  + (f"up to {limit:,.0f} events/s per process" if limit else "at no tested load"))
    print(f"written: {out_file}")
    return 0


def _placement(args: argparse.Namespace, stack: contextlib.ExitStack, client_cores: list[int],
               counts: list[int], setup: dict[str, Any]
               ) -> tuple[Placement, tuple[list[str], str] | None]:
    """Where the client runs, and the pacer's host (None: this one's loopback)."""
    if not args.worker_hosts:
        return LocalProcesses(client_cores or None), None
    why = Hosts.missing()
    if why:
        raise CalibrationError(f"--worker-hosts needs hosts of its own: {why}")
    most = max(counts)
    master, workers, shared = host_cores(client_cores or [0], most, args.cores_per_host)
    if shared:
        print(f"warning: {most} worker hosts of {args.cores_per_host} core(s) and a master need "
              f"{1 + most * args.cores_per_host} client cores, and have {len(client_cores) or 1}: "
              "they share cores, so the table shows what crosses the network, not how far "
              "hosts of their own would carry", file=sys.stderr)
    setup.update(worker_hosts=counts, cores_per_host=args.cores_per_host, master_cores=master,
                 worker_cores=workers, hosts_share_cores=shared)
    hosts = stack.enter_context(Hosts(host_names(most)))
    return WorkerHosts(hosts, master, workers), (hosts.prefix("engine"), hosts.address("engine"))


def _save(path: Path, host: str, ncpu: int, setup: dict[str, Any], rows: list[dict[str, Any]],
          raw: Path) -> None:
    limits = faithful_limits(rows)
    client_cores = len(setup["client_cores"] or []) or ncpu
    by_hosts = {"faithful_events_per_s_by_hosts": faithful_by_hosts(rows)} if "worker_hosts" in setup else {}
    write_json(path, {
        "schema": SCHEMA, "hostname": host, "cpu_count": ncpu, "cpu_model": cpu_model(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "criterion": CRITERION, "setup": setup,
        "faithful_events_per_s": headline_limit(limits, client_cores),
        "faithful_events_per_s_per_process": limits, **by_hosts, "rows": rows,
        "table": format_table(rows).splitlines(), "raw": str(raw)})


if __name__ == "__main__":
    sys.exit(main())
