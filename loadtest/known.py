"""When a heat's answer is known, and who must run it again until it is (`--until-known`).

A heat is one workload at one user count run by competitors: the engines of `rig race`
(loadtest/race/execute.py), the engine configurations of `rig sweep flags`
(loadtest/sweep/repeats.py). Below, "engine" stands for either.

The rule, on each engine's runs of one heat (output tok/s, the race's ranking figure):
- the leader is the engine with the highest mean; the runner-up the next;
- the leader is ahead of another engine when both have at least MIN_RUNS runs and the two-sided
  95% Welch t-interval on the difference of their means excludes 0: difference > t * sqrt(s1^2/n1
  + s2^2/n2), t from Student's table at the Welch-Satterthwaite degrees of freedom (rounded
  down, so a little wide). A rule on ranges (the leader's worst run beats the others' best) would
  never resolve by repeating: more runs only widen a range;
- the answer is known when the leader is ahead of every other engine in the heat;
- until then, the engines that run the heat again are the contenders: the leader and every
  engine it is not ahead of. An engine stops at --max-repeats runs of a heat; repeating stops
  when no contender is left under that cap, or at --max-time.

How many runs would resolve a difference of X%: with the pooled standard deviation s of the
leader's and the runner-up's runs, the fewest n runs each with t(2n - 2) * s * sqrt(2 / n) < X%
of the runner-up's mean (the same interval, were both spreads s; an estimate, as s is).

The rule is checked after every pass (sequential looks at the same data), so a level heat is
called known more often than 5% of the time; --max-repeats bounds the number of looks
(docs/race.md says so to the user).

Nothing here runs anything: tested on made-up runs (tests/test_race_plan.py,
tests/test_sweep_known.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["DEFAULT_MAX_REPEATS", "MIN_RUNS", "Standing", "ahead", "more_runs", "repeat_plan",
           "runs_to_resolve", "standing", "t95"]

MIN_RUNS = 2
DEFAULT_MAX_REPEATS = 5  # --max-repeats when not given: runs of one heat by one engine at most
HeatKey = TypeVar("HeatKey", int, tuple[str, int])  # the race's user count; a sweep's (workload, users)
# Student's t, two-sided 95%, by degrees of freedom 1..30; 1.96 beyond.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


@dataclass(frozen=True)
class Standing:
    """One heat: who leads, whether that is known, who runs it again."""
    leader: str
    runner_up: str | None  # None: the engine ran the heat alone
    known: bool
    contenders: tuple[str, ...]  # run the heat again while not known (empty when known)
    runs: Mapping[str, int]
    leader_mean: float
    runner_up_mean: float = math.nan
    spread: float = math.nan  # pooled standard deviation of the leader's and runner-up's runs

    @property
    def ahead_pct(self) -> float:
        return 100 * (self.leader_mean / self.runner_up_mean - 1) if self.runner_up else math.nan


def standing(samples: Mapping[str, Sequence[float]]) -> Standing:
    """The heat's standing from each engine's runs (non-empty lists of tok/s)."""
    means = {engine: statistics.fmean(runs) for engine, runs in samples.items() if runs}
    if not means:
        raise ValueError("no engine ran this heat")
    order = sorted(means, key=lambda engine: -means[engine])
    leader = order[0]
    runs = {engine: len(samples[engine]) for engine in order}
    if len(order) == 1:
        return Standing(leader, None, True, (), runs, means[leader])
    second = order[1]
    close = [e for e in order[1:] if not ahead(samples[leader], samples[e])]
    known = not close
    contenders = () if known else (leader, *close)
    return Standing(leader, second, known, contenders, runs, means[leader], means[second],
                    _pooled_sd(samples[leader], samples[second]))


def repeat_plan(heats: Mapping[HeatKey, Mapping[str, Sequence[float]]], engines: Sequence[str],
                max_repeats: int) -> list[tuple[str, tuple[HeatKey, ...]]]:
    """[(engine, the heats it runs again)], in ``engines``' order: each unknown heat's
    contenders that have fewer than ``max_repeats`` runs of it."""
    again: dict[str, list[HeatKey]] = {engine: [] for engine in engines}
    for users in sorted(heats):
        if not heats[users]:
            continue
        heat = standing(heats[users])
        for engine in heat.contenders:
            if engine in again and heat.runs[engine] < max_repeats:
                again[engine].append(users)
    return [(engine, tuple(users)) for engine, users in again.items() if users]


def runs_to_resolve(spread: float, mean: float, difference_pct: float) -> int | None:
    """Runs per engine for a difference of ``difference_pct`` percent of ``mean`` to stand out of
    noise of standard deviation ``spread`` (None: no spread to judge by, e.g. single runs)."""
    if math.isnan(spread) or difference_pct <= 0 or mean <= 0:
        return None
    difference = mean * difference_pct / 100
    # t(2n-2) <= 12.706 and falls with n: the large-sample bound starts the search near the answer
    n = max(MIN_RUNS, math.floor(2 * (1.96 * spread / difference) ** 2))
    while t95(2 * n - 2) * spread * math.sqrt(2 / n) >= difference:
        n += 1
    return n


def more_runs(heat: Standing, difference_pct: float) -> int | None:
    """About how many more runs each of the leader and the runner-up would resolve a difference
    of ``difference_pct`` percent (at least 1; None: no spread to judge by, or no runner-up)."""
    if heat.runner_up is None:
        return None
    need = runs_to_resolve(heat.spread, heat.runner_up_mean, difference_pct)
    if need is None:
        return None
    return max(1, need - min(heat.runs[heat.leader], heat.runs[heat.runner_up]))


def t95(freedom: float) -> float:
    """Student's t, two-sided 95%, at ``freedom`` degrees of freedom rounded down (at least 1)."""
    whole = max(1, int(freedom))
    return _T95[whole - 1] if whole <= len(_T95) else 1.96


def ahead(a: Sequence[float], b: Sequence[float]) -> bool:
    """Is a's mean above b's, the 95% Welch t-interval on the difference excluding 0?"""
    if len(a) < MIN_RUNS or len(b) < MIN_RUNS:
        return False
    difference = statistics.fmean(a) - statistics.fmean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return difference > 0
    freedom = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return difference > t95(freedom) * math.sqrt(va + vb)


def _pooled_sd(a: Sequence[float], b: Sequence[float]) -> float:
    freedom = len(a) + len(b) - 2
    if freedom <= 0 or len(a) < 2 or len(b) < 2:
        return math.nan
    return math.sqrt(((len(a) - 1) * statistics.variance(a)
                      + (len(b) - 1) * statistics.variance(b)) / freedom)
