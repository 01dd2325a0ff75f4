"""Benchmark building workloads: how long and how much memory, before anything is sent.

Goals (issue 22): a 10,000-request synthetic workload built with the model's tokenizer in at
most 5 s; a 100,000-request Mooncake trace loaded in at most 10 s and at most 1 GiB, its
bodies built on take (a take's cost printed, first and last 1,000: it must not grow).

usage: python scripts/bench_workload.py [--tokenizer models/tiny-llama] [--synthetic 10000]
           [--trace-requests 100000] [--keep DIR]
Each part runs in a fresh process so its peak memory is its own (ru_maxrss, less the process's
size before building). The trace is written first (Mooncake-like: a timestamp every ~20 ms,
input 512-8192 tokens in 512-token blocks shared between requests, output 16-512), to --keep
or a temporary folder. Prints one line per measure and exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from loadtest.workload import build_workload, workload_options  # noqa: E402

SYNTHETIC_GOAL_S = 5.0
TRACE_GOAL_S = 10.0
TRACE_GOAL_BYTES = 1 << 30
_BLOCK = 512


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer", default=str(REPO / "models" / "tiny-llama"))
    p.add_argument("--synthetic", type=int, default=10_000, help="synthetic requests")
    p.add_argument("--trace-requests", type=int, default=100_000)
    p.add_argument("--keep", default="", help="folder for the generated trace (default: temporary)")
    p.add_argument("--part", choices=("synthetic", "trace"), help=argparse.SUPPRESS)
    p.add_argument("--trace", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.part == "synthetic":
        return _print(_synthetic(args.tokenizer, args.synthetic))
    if args.part == "trace":
        return _print(_trace(args.tokenizer, Path(args.trace), args.trace_requests))
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(args.keep or tmp) / f"mooncake-like-{args.trace_requests}.jsonl"
        trace.parent.mkdir(parents=True, exist_ok=True)
        write_trace(trace, args.trace_requests)
        synthetic = _child(["--part", "synthetic", "--synthetic", str(args.synthetic),
                            "--tokenizer", args.tokenizer])
        replay = _child(["--part", "trace", "--trace", str(trace), "--trace-requests",
                         str(args.trace_requests), "--tokenizer", args.tokenizer])
    ok = synthetic["build_s"] <= SYNTHETIC_GOAL_S
    print(f"synthetic: {synthetic['requests']:,} requests ({synthetic['mean_prompt_tokens']:.0f} "
          f"prompt tokens mean) built in {synthetic['build_s']:.2f} s (goal <= {SYNTHETIC_GOAL_S:g} s), "
          f"peak +{synthetic['peak_mib']:.0f} MiB: {'ok' if ok else 'MISSED'}")
    trace_ok = replay["build_s"] <= TRACE_GOAL_S and replay["peak_mib"] * (1 << 20) <= TRACE_GOAL_BYTES
    print(f"trace: {replay['requests']:,} requests ({replay['trace_mib']:.0f} MiB file) loaded in "
          f"{replay['build_s']:.2f} s (goal <= {TRACE_GOAL_S:g} s), peak +{replay['peak_mib']:.0f} MiB "
          f"after taking 2,000 bodies (goal <= 1024 MiB): {'ok' if trace_ok else 'MISSED'}")
    print(f"trace: one take (a body built from its blocks on the user's turn) "
          f"{replay['take_first_us']:.0f} us mean over the first 1,000, "
          f"{replay['take_last_us']:.0f} us over the last 1,000")
    return 0 if ok and trace_ok else 1


def write_trace(path: Path, requests: int, seed: int = 0) -> None:
    """A Mooncake-like trace: requests share leading blocks with earlier ones (a conversation's
    history, a common system prompt) as the published traces do."""
    import numpy as np
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(20.0, requests)
    inputs = rng.integers(_BLOCK, 16 * _BLOCK, requests, endpoint=True)
    outputs = rng.integers(16, 512, requests, endpoint=True)
    next_block = 0
    with path.open("w") as file:
        stamp = 0.0
        for i in range(requests):
            blocks = -(-int(inputs[i]) // _BLOCK)
            shared = int(rng.integers(0, blocks)) if i else 0
            ids = list(range(shared)) + list(range(next_block + 100_000, next_block + 100_000 + blocks - shared))
            next_block += blocks - shared
            stamp += gaps[i]
            file.write(json.dumps({"timestamp": int(stamp), "input_length": int(inputs[i]),
                                   "output_length": int(outputs[i]), "hash_ids": ids}) + "\n")


def _synthetic(tokenizer: str, requests: int) -> dict[str, float]:
    base = _rss_mib()
    start = time.perf_counter()
    source = workload_options(SimpleNamespace(workload="synthetic", input_len="128-2048",
                                              output_len="64", tokenizer=tokenizer))
    workload = build_workload("mixed", requests, api="completions", model="m", max_tokens=64,
                              source=source)
    build_s = time.perf_counter() - start
    return {"requests": len(workload.specs), "build_s": build_s, "peak_mib": _rss_mib() - base,
            "mean_prompt_tokens": float(workload.columns["prompt_tokens_asked_mean"])}


def _trace(tokenizer: str, trace: Path, requests: int) -> dict[str, float]:
    base = _rss_mib()
    start = time.perf_counter()
    source = workload_options(SimpleNamespace(workload="trace", trace=str(trace), tokenizer=tokenizer))
    workload = build_workload("mixed", requests, api="completions", model="m", max_tokens=64,
                              source=source)
    build_s = time.perf_counter() - start
    specs = workload.specs
    first_us = _take_us(specs, range(1000))
    last_us = _take_us(specs, range(len(specs) - 1000, len(specs)))
    return {"requests": len(specs), "build_s": build_s, "peak_mib": _rss_mib() - base,
            "trace_mib": trace.stat().st_size / (1 << 20), "take_first_us": first_us,
            "take_last_us": last_us}


def _take_us(specs: object, indices: range) -> float:
    """Mean microseconds to take one spec (its body built from cached block texts)."""
    start = time.perf_counter()
    for i in indices:
        specs[i]  # type: ignore[index]
    return (time.perf_counter() - start) / len(indices) * 1e6


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _child(args: list[str]) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"error: the benchmark's part failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)


def _print(result: dict[str, float]) -> int:
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
