"""The race's schedule, from data alone: its heats, who runs what in which order, and when.

A race runs engines one at a time on the same workload. A heat is that workload at one user
count, with one request count for every engine in it, so the heat ranks them. Each engine is
started once (a leg), warmed up, runs its user counts in rising order and is stopped: what a run
follows matters (llama.cpp ran one user 1.5x slower right after 128 users than after a warm-up).

A run under 5 s is invalid (the verdict's `short_run`) and never ranked: request counts tuned so
that the fastest engine lasts 5 s on one machine run shorter on a faster one. Such a run raises
its heat's count (`raised_counts`) and its engine runs the heat again at once, before its next
user count; the engines after it run the raised count from the start, and those before it catch
up at the end (`Race.legs`). A count given by the user (REQUESTS) is raised the same way: a heat
whose run is too short to rank has no winner, whoever chose its count.

Nothing here reads or writes a file or starts a process (loadtest/race/execute.py does), so the
whole schedule is tested on made-up runs (tests/test_race_plan.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "CATCH_UP_PASSES",
    "DEFAULT_USERS",
    "MAX_TOKENS",
    "MAX_TRIES",
    "PROMPTS",
    "TARGET_S",
    "Leg",
    "Race",
    "default_requests",
    "earlier_counts",
    "first_counts",
    "raised_counts",
]

DEFAULT_USERS = (1, 8, 32, 128)
PROMPTS = "mixed"
# 64 output tokens, not 128: past saturation (128 users on one core) every engine's run is long
# (transformers: 132 s at 128 tokens), and a re-run of the race should fit in 8 minutes.
MAX_TOKENS = 64
TARGET_S = 6.5  # a raised count aims here: above the verdict's 5 s, with room for run-to-run spread
MAX_TRIES = 3  # runs of one heat in a row by one engine: the first and two raised ones at most
CATCH_UP_PASSES = 2  # a count raised while catching up is caught up once more


def default_requests(users: int) -> int:
    """Requests per run at ``users``: 4 per user and at least 144, so that the fastest engine on
    the 2-core machine the race was tuned on (llama.cpp on its one core: ~1,360 tok/s at 8 users,
    ~1,410 at 32, evidence/2026-11-28/demo-answers) runs TARGET_S or more; one user's requests run
    one after another, so 96 suffice there (llama.cpp: ~810 tok/s, 7.6 s); at most 256 or 2 per
    user (the fewest for a steady state), so that many users stay affordable. The default users
    get 96, 144, 144 and 256. Too few would cost more than they save: a short run is run again,
    and an engine that ran the heat before it runs it again at the end (Race.legs)."""
    least = 96 if users == 1 else 144
    return min(max(4 * users, least), max(2 * users, 256))


def first_counts(users: Sequence[int], requests: int | None = None,
                 earlier: Mapping[int, int] | None = None) -> dict[int, int]:
    """{users: requests} the race starts from: ``requests`` where given, else the default count
    or the larger count an earlier race in the same results folder ran (``earlier``), so that a
    re-run does not find out again that the defaults are too few on this machine."""
    if requests is not None:
        return {count: requests for count in users}
    earlier = earlier or {}
    return {count: max(default_requests(count), earlier.get(count, 0)) for count in users}


def raised_counts(rows: Sequence[Mapping[str, str]], seconds: float = TARGET_S) -> dict[int, int]:
    """{users: requests} for each user count whose runs (runs.csv rows) include a `short_run`
    with no failed request: the most requests any of them needs to last ``seconds``.

    Each short run asks for a whole multiple (at least 2) of its own count and the largest ask
    wins, so short runs of different counts (an engine that ran a count another engine had
    already raised) are all covered. A run with failed requests asks for nothing: its length says
    nothing about how long the requests take."""
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


def earlier_counts(rows: Sequence[Mapping[str, str]], prompts: str,
                   max_tokens: int) -> dict[int, int]:
    """{users: the most requests run at that user count on ``prompts`` x ``max_tokens``}, from
    runs.csv rows (their prompts, max_tokens and requests columns)."""
    counts: dict[int, int] = {}
    for row in rows:
        if row.get("prompts") == prompts and row.get("max_tokens") == str(max_tokens):
            users = int(row["users"])
            counts[users] = max(counts.get(users, 0), int(row["requests"]))
    return counts


@dataclass(frozen=True)
class Leg:
    """One start of one engine: a warm-up, then a run at each of ``users`` (rising), then stop.
    ``catch_up``: it runs heats whose count a later engine raised after this one ran them;
    ``repeat``: it runs heats again whose leader is not known yet (loadtest/known.py)."""
    engine: str
    users: tuple[int, ...]
    catch_up: bool = False
    repeat: bool = False


class Race:
    """The race's state (each heat's count, what each engine ran, who is out) and its next step.

    The executor walks it:

        for leg in race.legs():
            start leg.engine (or race.did_not_run(...) and go on)
            for users in race.runs(leg):
                run race.counts[users] requests at users; race.record(leg.engine, users, rows)
            stop leg.engine

    Both generators read the state as it is when they resume, so a count raised by one run
    decides the next run, the engines after it and the catch-up."""

    def __init__(self, engines: Sequence[str], users: Sequence[int],
                 counts: Mapping[int, int]) -> None:
        """``counts``: {users: requests} to start from (first_counts), given or chosen: either
        way a run too short to rank raises its heat's count."""
        self.engines = tuple(engines)
        self.users = tuple(sorted(users))
        self.counts = {users: counts[users] for users in self.users}
        self.ran: dict[tuple[str, int], int] = {}  # (engine, users) -> requests of its last run
        self.out: dict[str, str] = {}  # engine -> why it did not run; it is not started again
        self._tries = 0  # runs of the current heat in a row by the current leg
        self._again = False  # the last run raised its heat's count: run it again at once

    def legs(self) -> Iterator[Leg]:
        """Every engine once, at every user count, in the given order; then up to
        CATCH_UP_PASSES passes over the engines that ran a heat with fewer requests than it
        has now, each at those user counts alone. Engines out of the race are skipped."""
        for engine in self.engines:
            if engine not in self.out:
                yield Leg(engine, self.users)
        for _ in range(CATCH_UP_PASSES):
            caught_up = False
            for engine in self.engines:
                behind = self.behind(engine)
                if behind and engine not in self.out:
                    caught_up = True
                    yield Leg(engine, behind, catch_up=True)
            if not caught_up:
                return

    def runs(self, leg: Leg) -> Iterator[int]:
        """The user counts ``leg`` runs, in order: each of its own, and the same again at once
        after a run that raised its heat's count (MAX_TRIES runs of a heat at most)."""
        for users in leg.users:
            self._tries = 0
            self._again = True
            while self._again and leg.engine not in self.out:
                self._again = False
                yield users

    def record(self, engine: str, users: int, rows: Sequence[Mapping[str, str]]) -> int | None:
        """Record that ``engine`` ran the heat at ``users`` with its current count; ``rows``: the
        runs.csv rows that run added. Returns the heat's raised count when the run was too short
        to rank (the engine then runs it again at once), else None."""
        self.ran[engine, users] = self.counts[users]
        self._tries += 1
        if self._tries >= MAX_TRIES:
            return None
        raised = raised_counts(rows).get(users)
        if raised is None or raised <= self.counts[users]:
            return None
        self.counts[users] = raised
        self._again = True
        return raised

    def did_not_run(self, engine: str, reason: str) -> None:
        """``engine`` could not start or run: recorded, and the race goes on without it."""
        self.out.setdefault(engine, reason)

    def behind(self, engine: str) -> tuple[int, ...]:
        """The user counts ``engine`` last ran with fewer requests than their heats have now
        (or never ran)."""
        return tuple(users for users in self.users
                     if self.ran.get((engine, users), 0) < self.counts[users])
