"""python -m loadtest.sweep.flags MATRIX.yaml: the flag sweep (scripts/sweep_flags.sh).

    python -m loadtest.sweep.flags sweeps/vllm-cpu-max-num-seqs.yaml
    python -m loadtest.sweep.flags sweeps/tgi-speculate.yaml --dry-run   # every cell and command

The whole matrix is checked before anything starts (unknown engine or setting, a value an
engine refuses, a GPU this host lacks); a bad one is refused with one line and exit 2.
Re-running the same command resumes: cells measured before (same settings, same workload,
same rig version) are skipped, and say so.
"""

from __future__ import annotations

import sys
from pathlib import Path

from servers.gpus import gpu_count
from loadtest.cli.args import RigParser, command_prog
from loadtest.cli.types import writable_folder
from loadtest.sweep.matrix import MatrixError, load_matrix
from loadtest.sweep.runner import run_sweep

__all__ = ["main", "parser"]


def parser() -> RigParser:
    p = RigParser(prog=command_prog("python -m loadtest.sweep.flags"),
                  description="Start each engine configuration of a matrix, measure it at every "
                              "user count, stop it.",
                  epilog="example:\n  rig sweep flags sweeps/vllm-cpu-max-num-seqs.yaml --dry-run")
    p.add_argument("matrix", type=Path, help="YAML matrix (see sweeps/README.md)")
    p.add_argument("--out", type=writable_folder, default=Path("results"),
                   help="results folder: runs.csv and sweeps/NAME/ (default results/)")
    p.add_argument("--dry-run", action="store_true",
                   help="print every configuration, cell and command; start nothing (no GPU needed)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        matrix = load_matrix(args.matrix, None if args.dry_run else gpu_count())
        return run_sweep(matrix, args.out, kind="flags", dry_run=args.dry_run)
    except MatrixError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
