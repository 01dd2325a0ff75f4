"""The command line of one in-process run.

    python -m loadtest.inprocess ENGINE[:VARIANT] [--batch B[,B...]] [--requests N] [--max-tokens M]
        [--prompts NAME|FILE] [--warmup-requests K] [--out DIR] [--tag T] [--repeat R] [--repeats K] [--gpu G]
        [--engine-cpus LIST | --no-pin] [--timeout S]

Exit: 0 every request completed, 1 some failed (recorded), 2 bad input or the run could not
happen (one `error:` line, e.g. an engine that is not installed, naming the install step).
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from loadtest.launch.options import add_run_options
from loadtest.toolkit.args import RigParser, command_prog
from loadtest.toolkit.types import (cpu_list, duration, non_negative_int, positive_int,
                                    positive_int_list, writable_folder)
from loadtest.cpus import complete_layout
from loadtest.inprocess.engines import ENGINES, SpecError, parse_spec
from loadtest.inprocess.runner import InprocError, InprocRun, run_inprocess
from loadtest.race.plan import TARGET_S, raised_counts
from loadtest.workload import add_workload_options, workload_options

__all__ = ["checked_args", "main", "parser", "short_run_hints"]


PER_BATCH = 4  # requests per sequence when several batch sizes run: a steady state at each


def _batches(text: str) -> tuple[int, ...]:
    return tuple(positive_int_list(text))


def _variants() -> str:
    return ", ".join(f"{slug}:{v}" if v else slug for slug, e in ENGINES.items() for v in e.variants)


def _engines_help() -> str:
    return "\n".join(f"  {slug}{'' if e.batches else ' (batch 1 only)'}: TTFT from "
                      f"{e.streams}; install: {e.install}" for slug, e in ENGINES.items())


def parser() -> RigParser:
    p = RigParser(prog=command_prog("python -m loadtest.inprocess"),
                  description="Run the fixed workload through an engine library in-process (a "
                              "worker process in the engine's venv), recorded as a server run is.",
                  epilog=f"engines: {_variants()}\n{_engines_help()}\n\nexample:\n"
                         f"  rig inprocess vllm-offline --batch 1,4,16 --requests 64")
    p.add_argument("engine", help="ENGINE[:VARIANT]")
    p.add_argument("--batch", type=_batches, default=(1,),
                   help="sequences at once, as users for a server (default 1); a list, e.g. "
                        f"1,4,16,64, runs each size in turn on the engine loaded once, with at "
                        f"least {PER_BATCH} requests per sequence")
    add_run_options(p, "requests", "max_tokens", "prompts",
                    helps={"max_tokens": "output tokens per request, exactly"})
    p.add_argument("--warmup-requests", type=non_negative_int, default=2,
                   help="requests run first and not recorded (at least one batch; 0 = none)")
    p.add_argument("--out", type=writable_folder, default=Path("results"), help="results folder")
    add_run_options(p, "tag", "repeat",
                    helps={"repeat": "repeat number recorded with the (first) run"})
    p.add_argument("--repeats", type=positive_int, default=1,
                   help="runs of the workload, one after another on the engine loaded and "
                        "warmed up once, each its own row (default 1)")
    add_run_options(p, "gpu")
    p.add_argument("--engine-cpus", type=cpu_list, default=None,
                   help="cores for the engine's worker (default: all but the first, as servers)")
    p.add_argument("--no-pin", action="store_true", help="let the worker use every core")
    p.add_argument("--timeout", type=duration, default=1800,
                   help="how long before the run is stopped: seconds, or 30m, 2h (default 1800)")
    add_workload_options(p)  # the server runs' workload sources (conversations and traces refused)
    p.set_defaults(requests=18, max_tokens=200)
    return p


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM as Ctrl-C: the worker's process group is stopped on the way out


def checked_args(argv: list[str] | None) -> argparse.Namespace:
    """The options, every one checked before the worker starts (engine spec, layout, workload);
    one `error:` line and exit 2 otherwise."""
    p = parser()
    args = p.parse_args(argv)
    try:
        args.spec = parse_spec(args.engine)
        if args.no_pin and args.engine_cpus:
            raise SpecError("--no-pin and --engine-cpus exclude each other")
        args.engine_cpus = "" if args.no_pin else complete_layout(args.engine_cpus or "", "")[0]
        args.source = workload_options(args)
    except (SpecError, ValueError) as exc:
        p.error(str(exc))
    return args


def main(argv: list[str] | None = None) -> int:
    args = checked_args(argv)
    signal.signal(signal.SIGTERM, _terminated)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started in the background
    engine, variant, options, flags = args.spec
    try:
        rows = run_inprocess(InprocRun(
            engine=engine, variant=variant, options=options, flags=flags, batch=args.batch[0],
            batches=args.batch if len(args.batch) > 1 else (),
            min_requests_per_batch=PER_BATCH if len(args.batch) > 1 else 0,
            requests=args.requests, prompts=args.prompts, max_tokens=args.max_tokens,
            warmup_requests=args.warmup_requests, out=args.out, tag=args.tag, repeat=args.repeat,
            repeats=args.repeats, gpu=args.gpu, engine_cpus=args.engine_cpus, timeout_s=args.timeout,
            source=args.source))
    except (SpecError, InprocError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; the worker was stopped", file=sys.stderr)
        return 130
    for hint in short_run_hints(rows):
        print(hint, file=sys.stderr)
    return 1 if any(row.get("failed") for row in rows) else 0


def short_run_hints(rows: list[dict]) -> list[str]:
    """A line per batch size whose run was too short to rank (`short_run`), with the --requests
    that would make it last about TARGET_S seconds (the count the race would raise it to)."""
    return [f"note: batch {batch}'s run was too short to rank (short_run): --requests {requests} "
            f"would last about {TARGET_S:g} s" for batch, requests in raised_counts(rows).items()]
