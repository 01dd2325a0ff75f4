"""python -m loadtest.sweep.flags MATRIX.yaml: the flag sweep (scripts/sweep_flags.sh).

    python -m loadtest.sweep.flags sweeps/vllm-cpu-max-num-seqs.yaml
    python -m loadtest.sweep.flags sweeps/tgi-speculate.yaml --dry-run   # every cell and command
    python -m loadtest.sweep.flags sweeps/llamacpp-cpu-parallel.yaml --until-known --max-repeats 4

The whole matrix is checked before anything starts (unknown engine or setting, a value an
engine refuses, a GPU this host lacks); a bad one is refused with one line and exit 2.
Re-running the same command resumes: cells measured before (same settings, same workload,
same rig version) are skipped, and say so. --until-known repeats cells until the fastest
configuration at each user count is known (loadtest/sweep/repeats.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from servers.gpus import gpu_count
from loadtest.toolkit.args import RigParser, command_prog
from loadtest.toolkit.until_known import add_until_known, check_caps
from loadtest.toolkit.types import writable_folder
from loadtest.known import DEFAULT_MAX_REPEATS
from loadtest.sweep.matrix import MatrixError, load_matrix
from loadtest.sweep.repeats import UntilKnown, check_until_known

__all__ = ["main", "parse_args", "parser", "until_known"]


def parser() -> RigParser:
    p = RigParser(prog=command_prog("python -m loadtest.sweep.flags"),
                  description="Start each engine configuration of a matrix, measure it at every "
                              "user count, stop it. With --until-known, the configurations that "
                              "are not yet told apart at a user count run it again (sweeps/README.md).",
                  epilog="examples:\n  rig sweep flags sweeps/vllm-cpu-max-num-seqs.yaml --dry-run\n"
                         "  rig sweep flags sweeps/llamacpp-cpu-parallel.yaml --until-known "
                         "--max-repeats 4 --max-time 15m")
    p.add_argument("matrix", type=Path, help="YAML matrix (see sweeps/README.md)")
    p.add_argument("--out", type=writable_folder, default=Path("results"),
                   help="results folder: runs.csv and sweeps/NAME/ (default results/)")
    p.add_argument("--dry-run", action="store_true",
                   help="print every configuration, cell and command; start nothing (no GPU needed)")
    add_until_known(p, heat="user count", rival="configuration", span="sweep",
                    repeats_note=", the matrix's repeats included")
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The checked options; one `error:` line and exit 2 (SystemExit) on bad input."""
    p = parser()
    args = p.parse_args(argv)
    check_caps(p, args)
    return args


def until_known(args: argparse.Namespace) -> UntilKnown | None:
    if not args.until_known:
        return None
    return UntilKnown(max_repeats=args.max_repeats or DEFAULT_MAX_REPEATS,
                      max_time_s=args.max_time, resolve_pct=args.resolve_pct)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    until = until_known(args)
    try:
        matrix = load_matrix(args.matrix, None if args.dry_run else gpu_count())
        if until is not None:
            check_until_known(matrix, until)
        from loadtest.sweep.runner import run_sweep  # pandas: once the matrix is good

        return run_sweep(matrix, args.out, kind="flags", dry_run=args.dry_run, until=until)
    except MatrixError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
