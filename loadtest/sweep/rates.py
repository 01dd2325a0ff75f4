"""python -m loadtest.sweep.rates ENGINE: the rate sweep (scripts/sweep_rate.sh).

    python -m loadtest.sweep.rates vllm-cpu --rates 1,2,4,8,16 --users 64 --requests 96
    python -m loadtest.sweep.rates vllm --host http://gpu-box:8000 --rates 4,8,16,32 --slo ttft_ms=500

The same fixed workload, open loop, at rising offered rates (--rate, --users as the cap on
requests in flight), one fresh Locust process per run, after one closed-loop warm-up run (never
in runs.csv). It stops after the first rate the engine cannot sustain (answers finished below
90% of the schedule's own rate, or sends behind their schedule) unless --all-rates; then prints the open-loop table
with the knee (the smallest rate achieving within 5% of the best req/s) and, with --slo, the
highest rate at which --slo-share percent of requests met the targets, and writes the report
(python -m loadtest.report) to OUT/report-NAME/. Every run keeps its outputs (--keep-outputs)
so configurations can be compared for equal answers.

With --host the engine is one already running (not started or stopped); without it the local
engine is started on a free port (loadtest/local_engine.py; `--engine-cpus` pins it,
`--client-cpus` pins the client, as the demo does) and stopped at the end, on any exit.
Exit codes: 0 every rate measured, 1 some run failed or had failed requests, 2 bad options or
the engine did not start, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from loadtest.client.arrivals import ARRIVALS
from loadtest.cpus import complete_layout
from loadtest.client.targets import TARGETS
from loadtest.results.goodput import DEFAULT_SLO_SHARE_PCT
from loadtest.toolkit.args import RigParser, command_prog, fail
from loadtest.launch.processes import free_port
from loadtest.toolkit.types import (cpu_list, duration, one_of, percent, positive_int,
                                    positive_number_list, writable_folder)
from loadtest.launch import RunSpec, command, run
from loadtest.launch.options import RUNNING_ENGINE, add_run_options

__all__ = ["main", "parser"]


def parser() -> RigParser:
    p = RigParser(prog=command_prog("python -m loadtest.sweep.rates"),
                  description="At what request rate does this engine saturate?",
                  epilog="example:\n  rig sweep rates vllm-cpu --rates 1,2,4,8,16 --users 64 --requests 96")
    p.add_argument("engine", type=one_of(TARGETS, "engine"), metavar="ENGINE",
                   help=f"engine slug: {', '.join(TARGETS)}")
    p.add_argument("--rates", type=positive_number_list, default="1,2,4,8,16,32",
                   help="offered rates, req/s, comma-separated")
    add_run_options(p, "users", helps={"users": "cap on requests in flight"})
    add_run_options(p, "arrival", "burstiness", "arrival_seed", helps={
        "arrival": f"{' | '.join(ARRIVALS)}",
        "burstiness": "with --arrival gamma: the gaps' shape (below 1 bursty, 1 Poisson)",
        "arrival_seed": "the Poisson schedule's seed"})
    add_run_options(p, "requests", "max_tokens", "prompts", "ignore_eos", "slo")
    p.add_argument("--slo-share", type=percent, default=str(DEFAULT_SLO_SHARE_PCT),
                   help="percent of requests that must meet --slo (default 99)")
    p.add_argument("--repeats", type=positive_int, default="1", help="runs per rate (default 1)")
    p.add_argument("--all-rates", action="store_true", help="run every rate, even past saturation")
    add_run_options(p, "host", "flags", helps={
        "host": RUNNING_ENGINE["host"],
        "flags": "the engine's flags: recorded; passed to a started engine"})
    p.add_argument("--engine-cpus", type=cpu_list, default=None,
                   help="cores for a started engine (taskset list)")
    add_run_options(p, "client_cpus", helps={"client_cpus": "cores for the client (taskset list)"})
    p.add_argument("--name", default="", help="sweep name: tag and report folder (default rates-ENGINE)")
    p.add_argument("--out", type=writable_folder, default=Path("results"),
                   help="results folder (default results/)")
    p.add_argument("--run-timeout", type=duration, default="900",
                   help="how long one run may take: seconds, or 15m (default 900)")
    p.set_defaults(users=64, requests=128, max_tokens=64)
    return p


def _check(args: argparse.Namespace) -> None:
    if args.host and args.engine_cpus:
        raise ValueError("--engine-cpus pins an engine this sweep starts: drop it with --host")
    if not args.host:  # the engine this sweep starts, and its client, each on their own cores
        complete_layout(args.engine_cpus or "", args.client_cpus or "")
    if args.burstiness is not None and args.arrival != "gamma":
        raise ValueError("--burstiness shapes --arrival gamma's gaps: add --arrival gamma")


def _spec(args: argparse.Namespace, url: str, tag: str, users: int, **values: object) -> RunSpec:
    """One run of the sweep; `values`: fields and run options over the sweep's own."""
    return RunSpec.of(**{
        "engine": args.engine, "host": url, "users": users, "only_summary": True,
        "requests": args.requests, "max_tokens": args.max_tokens, "prompts": args.prompts,
        "out": args.out, "tag": tag, "flags": args.flags, "ignore_eos": args.ignore_eos,
        "cpus": args.client_cpus, "python": sys.executable, **values})


def _sweep(args: argparse.Namespace, url: str, rates: list[float], users: int, repeats: int,
           tag: str) -> int:
    from loadtest.report.goodput import saturated
    work = args.out / "sweeps" / tag
    work.mkdir(parents=True, exist_ok=True)
    warm = _spec(args, url, tag, min(users, 8), warmup=True, requests=16)
    print(f"+ warm-up: {' '.join(command(warm))}", file=sys.stderr, flush=True)
    run(warm, work / "warmup.log", float(args.run_timeout))
    worst = 0
    for rate in rates:
        past_knee = False
        for repeat in range(1, repeats + 1):
            # every sweep keeps the answers, to compare configurations
            spec = _spec(args, url, tag, users, rate=rate, arrival=args.arrival,
                         arrival_seed=args.arrival_seed, repeat=repeat,
                         burstiness=args.burstiness or None, slo=args.slo or None,
                         keep_outputs=True)
            print(f"+ rate {rate:g} req/s, repeat {repeat}: {' '.join(command(spec))}",
                  file=sys.stderr, flush=True)
            outcome = run(spec, work / f"rate{rate:g}-r{repeat}.log", float(args.run_timeout))
            if outcome.exit_code not in (0, 1):
                print(f"error: the run at {rate:g} req/s failed: {outcome.error}", file=sys.stderr)
                worst = max(worst, 1)
                continue
            worst = max(worst, outcome.exit_code)
            if outcome.row is not None and saturated(outcome.row):
                past_knee = True
        if past_knee and not args.all_rates:
            print(f"saturated at {rate:g} req/s: higher rates skipped (--all-rates runs them)",
                  file=sys.stderr)
            break
    return worst


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    try:
        _check(args)
    except ValueError as exc:
        p.error(str(exc))
    # pandas and matplotlib (a second) once the options are good, not for an error or --help
    from loadtest.report.goodput import rate_table
    from loadtest.report.runset import load_runs
    try:  # a runs.csv no run could add to, nor the report read: refused before anything starts
        load_runs(args.out)
    except ValueError as exc:
        fail(str(exc))
    rates, users, repeats, share = sorted(args.rates), args.users, args.repeats, args.slo_share
    tag = args.name or f"rates-{args.engine}"
    started = time.monotonic()
    try:
        if args.host:
            code = _sweep(args, args.host, rates, users, repeats, tag)
        else:
            from loadtest.local_engine import EngineStartError, LocalEngine

            log = args.out / "sweeps" / tag / "engine.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            try:
                engine_cpus = complete_layout(args.engine_cpus or "", args.client_cpus or "")[0]
                engine = LocalEngine(port=free_port(), log_path=log, engine=args.engine,
                                     extra_args=(args.flags or "").split(), cpus=engine_cpus or None)
                with engine:
                    code = _sweep(args, engine.url, rates, users, repeats, tag)
            except EngineStartError as exc:
                print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
                return 2
    except KeyboardInterrupt:
        print("interrupted: the engine was stopped; runs so far are in runs.csv", file=sys.stderr)
        return 130
    try:
        runs = load_runs(args.out)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    runs = runs[runs["tag"] == tag] if not runs.empty else runs
    table = rate_table(runs) if not runs.empty else runs
    if table.empty:
        print("error: no run of this sweep reached runs.csv", file=sys.stderr)
        return 2
    print(f"sweep {tag}: {len(runs)} runs in {(time.monotonic() - started) / 60:.1f} min",
          file=sys.stderr)
    from loadtest.report.cli import main as report

    report([str(args.out), "--where", f"tag={tag}", "--out", str(args.out / f"report-{tag}"),
            "--slo-share", f"{share:g}"])
    return code


if __name__ == "__main__":
    sys.exit(main())
