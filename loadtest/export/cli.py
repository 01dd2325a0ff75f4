"""rig export RESULTS... [--out DIR]: results folders as Parquet files and one DuckDB database.

    rig export results/                          # -> export/runs.parquet, ... results.duckdb
    rig export results/ sweeps/u128 --out /tmp/all
    duckdb export/results.duckdb "SELECT engine, users, avg(ttft_p99_ms) FROM runs GROUP BY ALL"

Reads every runs.csv under each RESULTS folder (a run's, or a sweep's with one per cell) and each
run's requests.jsonl; never runs anything. Writes, under --out: runs.parquet (one row per run,
with the folder and machine it came from), requests.parquet (one row per request, keyed by
run_id), run_files.parquet (each run's run.json and telemetry, for the report) and results.duckdb
holding the same three tables. `rig report` reads the folder or the database as it reads results.
Each file is replaced whole (loadtest/export/store.py); the tables and their types:
loadtest/export/tables.py, docs/export.md.
Exit codes: 0 written, 2 a folder or option it cannot use (one `error:` line, nothing written).
"""

from __future__ import annotations

import sys
from pathlib import Path

from loadtest.toolkit.args import RigParser, command_prog
from loadtest.toolkit.types import writable_folder

__all__ = ["main", "one_line", "parser"]


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # pandas, pyarrow and duckdb (about a second) once the options are good
    from loadtest.export.store import write_export
    from loadtest.export.tables import ExportError, read_results

    out = Path(args.out)
    try:
        tables, notes = read_results([Path(f) for f in args.results])
        written = write_export(tables, out)
    except ExportError as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(f"cannot write under {out} ({exc.strerror or exc})")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    runs, requests = len(tables.runs), len(tables.requests)
    print(f"{runs} run{'' if runs == 1 else 's'}, {requests} request"
          f"{'' if requests == 1 else 's'} from {len(args.results)} folder"
          f"{'' if len(args.results) == 1 else 's'}:")
    for path in written:
        print(f"  {path}")
    return 0


def one_line(text: str) -> str:
    """`text` with every character that would break its line (str.splitlines') escaped."""
    return "".join(repr(c)[1:-1] if len(f"a{c}b".splitlines()) > 1 else c for c in text)


def _error(message: str) -> int:
    # one line, whatever the folder's name or the file's content holds
    print(f"error: {one_line(message)}", file=sys.stderr)
    return 2


def parser() -> RigParser:
    p = RigParser(prog=command_prog("python -m loadtest.export.cli"),
                  description="Results folders exported to Parquet and to one DuckDB file.",
                  epilog="example:\n  rig export results/ --out export/\n"
                  "  rig report export/results.duckdb")
    p.add_argument("results", nargs="+", metavar="RESULTS",
                   help="results folders: every runs.csv below each is read")
    p.add_argument("--out", type=writable_folder, default="export",
                   help="where to write runs.parquet, requests.parquet, run_files.parquet and "
                   "results.duckdb (default export/)")
    return p


if __name__ == "__main__":
    sys.exit(main())
