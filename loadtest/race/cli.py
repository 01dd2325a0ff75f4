"""`rig race` / `python -m loadtest.race`: race local engines on one workload (loadtest/race/).

`--dry-run` checks the arguments and prints the plan without starting anything: scripts/demo.sh
asks it before installing, with the machine's own python3, so bad input fails at once. Up to
that point nothing here imports a package outside the standard library (the executor, which
needs the rig's packages, is imported only to run); tests/test_first_contact.py holds it to that.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from loadtest.race.args import RaceArgs, parse_args
from loadtest.race.earlier import EarlierRunsError, earlier_race_counts
from loadtest.race.plan import first_counts

__all__ = ["main"]


def _dry_run(args: RaceArgs, earlier: dict[int, int]) -> str:
    counts = first_counts(args.users, args.requests, earlier)
    heats = ", ".join(f"{n} {'user' if n == 1 else 'users'} x {counts[n]}"
                      for n in sorted(args.users))
    return (f"engines: {', '.join(args.engines)} on port {args.port}\n"
            f"layout: engine on cores {args.engine_cpus or 'any'}, client on cores "
            f"{args.client_cpus or 'any'}\n"
            f"heats (users x requests): {heats}\n"
            f"run options: {' '.join(args.run_options) or '(none)'}"
            + (f"\nuntil known: at most {args.max_repeats} runs of a heat per engine"
               + (f", no repeat after {args.max_time_s:g} s" if args.max_time_s else "")
               if args.until_known else "")
            + (f"\nanswers: the first {args.answers} graded prompts, each engine on "
               "SmolLM2-135M-Instruct" if args.answers else ""))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        earlier = earlier_race_counts(args)
    except EarlierRunsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(_dry_run(args, earlier))
        return 0
    from loadtest.race.execute import run_race  # the rig's packages: installed by now
    return run_race(args, earlier)
