"""python -m loadtest.telemetry --run-dir DIR --engine ENGINE --url URL [--gpus 0,1|all|none]

Samples until SIGTERM, then writes DIR/telemetry_summary.json and prints it.
"""

from __future__ import annotations

import json
import sys

from loadtest.toolkit.args import RigParser, command_prog
from loadtest.toolkit.types import positive_int, positive_number, url, writable_folder
from loadtest.telemetry.sampler import Sampler

__all__ = ["main", "parser"]


def parser() -> RigParser:
    p = RigParser(prog=command_prog("python -m loadtest.telemetry"),
                  description="Sample GPU and engine metrics until SIGTERM, then write and print "
                              "the run's telemetry summary.")
    p.add_argument("--run-dir", required=True, type=writable_folder)
    p.add_argument("--engine", required=True, help="engine slug, picks the metric names")
    p.add_argument("--url", required=True, type=url, help="engine base URL; /metrics is scraped")
    p.add_argument("--metrics-url", action="append", type=url, default=None,
                   help="an engine base URL whose /metrics is scraped instead of --url's, once "
                        "per replica behind a balancer (their samples merged)")
    p.add_argument("--gpus", default="all", help="NVML indices (0,1), all, or none")
    p.add_argument("--interval", type=positive_number, default=0.5,
                   help="seconds between samples")
    p.add_argument("--parent-pid", type=positive_int, default=None,
                   help="stop when this parent process is gone")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    gpus: list[int] | None | str
    if args.gpus == "all":
        gpus = None
    elif args.gpus == "none":
        gpus = "not asked for (--gpus none)"
    else:
        try:
            gpus = [int(i) for i in args.gpus.split(",")]
        except ValueError:
            print(f"error: --gpus {args.gpus!r}: give NVML indices (0,1), all or none",
                  file=sys.stderr)
            return 2
    summary = Sampler(args.run_dir, args.engine, args.metrics_url or [args.url], gpus,
                      args.interval).run(
        args.parent_pid)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
