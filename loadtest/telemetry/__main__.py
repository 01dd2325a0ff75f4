"""python -m loadtest.telemetry --run-dir DIR --engine ENGINE --url URL [--gpus 0,1|all|none]

Samples until SIGTERM, then writes DIR/telemetry_summary.json and prints it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from loadtest.telemetry.sampler import Sampler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.telemetry")
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--engine", required=True, help="engine slug, picks the metric names")
    parser.add_argument("--url", required=True, help="engine base URL; /metrics is scraped")
    parser.add_argument("--gpus", default="all", help="NVML indices (0,1), all, or none")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between samples")
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="stop when this parent process is gone")
    args = parser.parse_args(argv)
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
    summary = Sampler(args.run_dir, args.engine, args.url, gpus, args.interval).run(
        args.parent_pid)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
