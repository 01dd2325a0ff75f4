"""What earlier races left in the results folder: their rows and the request counts they ran.

Read before anything starts (`--dry-run` too), so this module needs nothing outside the
standard library: scripts/demo.sh checks its arguments with the machine's own python3, before
the rig's packages are installed.
"""

from __future__ import annotations

from pathlib import Path

from loadtest.race.args import RaceArgs
from loadtest.race.plan import earlier_counts
from loadtest.results.files import read_runs

__all__ = ["EarlierRunsError", "TAG", "earlier_race_counts", "race_rows"]

TAG = "demo"  # every race run is tagged so; the report's race picks them by it


class EarlierRunsError(ValueError):
    """The results folder's runs.csv cannot be read (before the race: bad input; during it: a
    file torn or edited meanwhile): one line for the user."""


def earlier_race_counts(args: RaceArgs) -> dict[int, int]:
    """{users: the most requests an earlier race in args.out ran there on this workload}; empty
    when the count was given, there is no earlier race, or the run options change the workload
    in a way runs.csv's columns cannot tell apart."""
    columns = args.workload_columns
    if args.requests is not None or columns is None:
        return {}
    rows = [row for row in race_rows(args.out) if row.get("tag") == TAG]
    return earlier_counts(rows, columns["prompts"], int(columns["max_tokens"]))


def race_rows(out: Path) -> list[dict[str, str]]:
    """Every row of out/runs.csv (none when there is none yet)."""
    try:
        return read_runs(out / "runs.csv")
    except (OSError, UnicodeDecodeError, ValueError, KeyError) as exc:
        raise EarlierRunsError(f"cannot read {out / 'runs.csv'}: {exc}") from None
