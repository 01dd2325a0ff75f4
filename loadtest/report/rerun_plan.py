"""Which heats of a race to run again with more requests, so that every engine can be ranked.

A run under 5 s is invalid (`short_run`) and never ranked. Request counts tuned so that the
fastest engine lasts 5 s on one machine run shorter on a faster one, and the race then names a
winner among the slower engines only. For each user count where a run of this race was too
short, this says how many requests would make every such run last `--seconds`: the same count
for every engine (one heat). Each short run asks for a whole multiple (at least 2) of its own
count, and the largest ask wins, so short runs of different counts (an engine that ran a count
another engine had already raised) are all covered. A run with failed requests is left out: its
length says nothing about how long the requests take.

    python -m loadtest.report.rerun_plan RESULTS/runs.csv --count
    python -m loadtest.report.rerun_plan RESULTS/runs.csv --after N --tag demo [--seconds 6.5]
    python -m loadtest.report.rerun_plan RESULTS/runs.csv --earlier mixed:64 --tag demo

`--count` prints how many rows runs.csv holds (take it before the race); `--after N` reads only
the rows after the first N and prints one `USERS REQUESTS` line per user count to run again.
`--earlier PROMPTS:MAX_TOKENS` prints, per user count, the most requests an earlier race ran
there on those prompts and output length: a re-run starts from them instead of measuring again
that the defaults are too few.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from loadtest.cli.args import RigParser
from loadtest.cli.types import non_negative_int, positive_number
from loadtest.results.files import read_runs

__all__ = ["earlier_counts", "rerun_plan"]

TARGET_S = 6.5  # above the verdict's 5 s, with room for an engine's run-to-run spread


def rerun_plan(rows: list[dict[str, str]], seconds: float = TARGET_S) -> dict[int, int]:
    """{users: requests} for each user count whose runs include a `short_run` with no failed
    request: the most requests any of them needs to last ``seconds``."""
    plan: dict[int, int] = {}
    for row in rows:
        if ("short_run" not in row.get("verdict_reasons", "").split(";")
                or (row.get("failed") or "0") != "0"):
            continue
        users = int(row["users"])
        duration = max(float(row["completion_time_s"] or 0), 0.1)
        needed = int(row["requests"]) * max(2, math.ceil(seconds / duration))
        plan[users] = max(plan.get(users, 0), needed)
    return dict(sorted(plan.items()))


def earlier_counts(rows: list[dict[str, str]], prompts: str, max_tokens: int) -> dict[int, int]:
    """{users: the most requests run at that user count on ``prompts`` x ``max_tokens``}."""
    counts: dict[int, int] = {}
    for row in rows:
        if row.get("prompts") == prompts and row.get("max_tokens") == str(max_tokens):
            users = int(row["users"])
            counts[users] = max(counts.get(users, 0), int(row["requests"]))
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = RigParser(prog="python -m loadtest.report.rerun_plan",
                       description=__doc__.split("\n\n")[0])
    parser.add_argument("runs_csv", type=Path)
    parser.add_argument("--count", action="store_true", help="print the number of rows only")
    parser.add_argument("--after", type=non_negative_int, default=0,
                        help="read only the rows after the first N")
    parser.add_argument("--tag", default="", help="only rows with this tag")
    parser.add_argument("--seconds", type=positive_number, default=TARGET_S)
    parser.add_argument("--earlier", metavar="PROMPTS:MAX_TOKENS",
                        help="the most requests run before at each user count on this workload")
    args = parser.parse_args(argv)
    try:
        rows = read_runs(args.runs_csv)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"error: cannot read {args.runs_csv}: {exc}", file=sys.stderr)
        return 2
    if args.count:
        print(len(rows))
        return 0
    rows = [row for row in rows[args.after:] if not args.tag or row.get("tag") == args.tag]
    if args.earlier:
        prompts, _, max_tokens = args.earlier.rpartition(":")
        if not (prompts and max_tokens.isdecimal()):
            parser.error(f"--earlier wants PROMPTS:MAX_TOKENS, e.g. mixed:64, got {args.earlier!r}")
        plan = earlier_counts(rows, prompts, int(max_tokens))
    else:
        plan = rerun_plan(rows, args.seconds)
    for users, requests in plan.items():
        print(users, requests)
    return 0


if __name__ == "__main__":
    sys.exit(main())
