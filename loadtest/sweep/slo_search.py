"""The SLO search's plan, from data alone: which open-loop rate to probe next, and when to stop.

The question: the highest offered rate (req/s) at which at least ATTAINMENT percent of the
requests meet every --slo target (loadtest/results/goodput.py: a run's `slo_met_pct`), and the
run met its percentile targets (`slo_percentiles` not "missed:..."). The rules:

- a probe is one rate, run once or more; it passes when the mean `slo_met_pct` of its runs is at
  least ATTAINMENT, no run missed a percentile target, and every run kept up with its schedule
  (not `saturated` as the report's SLO rate judges it, loadtest/report/goodput.py: a short probe
  past capacity can end before its queue makes TTFT miss). A mean within MARGIN percentage points
  of ATTAINMENT is too close to call from the noise: the rate is run again, up to MAX_REPEATS
  runs, and then judged on the mean of them all. A run where every request met the targets
  (100%), or none did, is not run again: at --attainment 99 and a margin of 2, every clean
  pass would otherwise run MAX_REPEATS times;
- bracketing: the lowest rate first (failing there ends the search: "misses at the lowest
  rate"), then each passing rate times GROWTH (2), capped at the highest rate, until one fails
  (passing at the highest rate ends it: "at least the highest rate");
- bisection: the bracket is [the highest passing rate below the lowest failing one, the lowest
  failing rate]; its midpoint is probed until the bracket is at most WIDTH wide (req/s, or
  percent of its lower end). The answer is the bracket's lower end, with the bracket as its
  uncertainty. Rates are rounded to 4 significant digits (the --rate text a run records).

Several targets at once, repeated probes and a confidence interval:
- every target is judged apart: the attainment (the mean `slo_met_pct`) and each percentile
  target (`ttft_p99_ms=2000`: the mean over the rate's runs of each run's p99, from the row's
  `slo_values`), so a failing probe says which target it missed and by how much;
- TRIALS: each rate is run at least this often before it is judged (1 keeps the margin rule
  above as the only repeat). With 2 runs or more, each target gets a two-sided 95% Student-t
  interval on its mean; a rate is *sure* when every target's interval lies on its side of the
  limit (a pass), or one missed target's interval lies wholly past it (a fail). A rate whose
  verdict is not sure is run again up to MAX_REPEATS runs, then judged on its means;
- the interval on the answer: from the highest rate that passed surely (below the lowest
  failing rate) to the lowest rate that failed surely; a side with no sure rate is open (None),
  as every side is with one run per rate. Each target's interval is 95% on its own, not
  corrected for several targets or rates, and the search assumes latency grows with the rate.

Nothing here runs anything (loadtest/sweep/slo.py does), so the search is tested on made-up
engines (tests/test_slo_search.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from loadtest.known import t95

__all__ = ["Bracket", "Judgement", "Limit", "Rule", "Run", "Width", "judge", "next_rate",
           "probe_verdict", "rounded"]

GROWTH = 2.0


@dataclass(frozen=True)
class Width:
    """How narrow the bracket must get: `value` req/s, or `value` percent of its lower end."""
    value: float
    relative: bool = False

    def reached(self, low: float, high: float) -> bool:
        limit = self.value * low / 100 if self.relative else self.value
        return high - low <= limit

    @property
    def text(self) -> str:
        return f"{self.value:g}%" if self.relative else f"{self.value:g} req/s"


@dataclass(frozen=True)
class Limit:
    """A percentile target of the run: its key (ttft_p99_ms) and limit in ms."""
    key: str
    limit_ms: float


@dataclass(frozen=True)
class Rule:
    attainment_pct: float  # (0, 100]
    width: Width
    min_rate: float
    max_rate: float
    margin_pct: float = 2.0  # percentage points: a mean this close to attainment_pct is repeated
    max_repeats: int = 3  # runs of one rate at most (at least trials)
    trials: int = 1  # runs of one rate at least
    limits: tuple[Limit, ...] = ()  # the percentile targets, judged on their values


@dataclass(frozen=True)
class Run:
    """One run of a probe, as its runs.csv row tells it."""
    met_pct: float  # slo_met_pct
    percentiles_met: bool = True  # slo_percentiles is not "missed:..."
    kept_up: bool = True  # not saturated: answers kept pace with the schedule, sends on time
    values: Mapping[str, float | None] = field(default_factory=dict)  # slo_values' percentiles


@dataclass(frozen=True)
class Judgement:
    """A rate's verdict (None: run it again), whether its intervals make it sure, and what it
    missed, each reason naming the target and by how much."""
    verdict: bool | None
    sure: bool = False
    missed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Bracket:
    """Where the answer lies: low passed, high failed. low None: even min_rate failed; high
    None: even max_rate passed. ci_low, ci_high: the 95% interval on the answer (module
    docstring), None where open."""
    low: float | None
    high: float | None
    ci_low: float | None = None
    ci_high: float | None = None

    @property
    def status(self) -> str:
        if self.low is None:
            return "misses at the lowest rate"
        return "at least the highest rate" if self.high is None else "found"


def rounded(rate: float) -> float:
    return float(f"{rate:.4g}")


def probe_verdict(runs: Sequence[Run], rule: Rule) -> bool | None:
    """True passed, False failed, None not known yet (run it again)."""
    return judge(runs, rule).verdict


def _half_width(values: Sequence[float]) -> float | None:
    """The 95% Student-t interval's half width on the mean; None below 2 values."""
    if len(values) < 2:
        return None
    return t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


@dataclass(frozen=True)
class _Figure:
    """One target over a rate's runs: its mean against its limit."""
    name: str
    values: tuple[float, ...]
    limit: float
    higher_is_better: bool
    unit: str

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def ok(self) -> bool:
        return self.mean >= self.limit if self.higher_is_better else self.mean <= self.limit

    @property
    def sure(self) -> bool:
        half = _half_width(self.values)
        return half is not None and not self.mean - half < self.limit < self.mean + half

    def reason(self) -> str:
        if self.unit == "%":
            return (f"{self.name} {self.mean:.4g}% < {self.limit:g}% "
                    f"({self.mean - self.limit:+.3g} points)")
        over = self.mean / self.limit
        return (f"{self.name} {self.mean:.4g} ms > {self.limit:g} ms "
                + (f"({over:.3g}x the limit)" if over >= 2 else f"(+{100 * (over - 1):.3g}%)"))


def _figures(runs: Sequence[Run], rule: Rule) -> tuple[list[_Figure], list[str]]:
    """Each target's figure over the runs, and the misses no figure can measure."""
    figures = [_Figure("attainment", tuple(r.met_pct for r in runs), rule.attainment_pct, True,
                       "%")]
    blind = []
    for limit in rule.limits:
        values = [r.values.get(limit.key) for r in runs]
        if all(v is not None for v in values):
            figures.append(_Figure(limit.key, tuple(values), limit.limit_ms, False, "ms"))
        elif not all(r.percentiles_met for r in runs) or any(limit.key in r.values for r in runs):
            blind.append(f"{limit.key} missed (no value to measure it by)")
    if not rule.limits and not all(r.percentiles_met for r in runs):
        blind.append("a percentile target missed")
    return figures, blind


def judge(runs: Sequence[Run], rule: Rule) -> Judgement:
    """The rate's verdict on its runs so far: every target apart, then all together."""
    if len(runs) < max(1, rule.trials):
        return Judgement(None)
    cap = max(rule.max_repeats, rule.trials)
    behind = sum(not r.kept_up for r in runs)
    figures, blind = _figures(runs, rule)
    missed = [f.reason() for f in figures if not f.ok] + blind
    if behind:
        missed.append(f"fell behind its schedule in {behind} of {len(runs)} runs")
        return Judgement(False, behind == len(runs) > 1, tuple(missed))
    if blind:
        return Judgement(False, False, tuple(missed))
    attained = figures[0].mean
    close = abs(attained - rule.attainment_pct) <= rule.margin_pct and 0 < attained < 100
    passed = not missed
    sure = (all(f.sure for f in figures) if passed
            else any(f.sure and not f.ok for f in figures))
    if len(runs) < cap and (close or (len(runs) > 1 and not sure)):
        return Judgement(None, False, tuple(missed))
    return Judgement(passed, sure, tuple(missed))


def _interval(judged: Mapping[float, Judgement], low: float | None,
              high: float | None) -> tuple[float | None, float | None]:
    """The answer's interval: the highest sure pass up to low, the lowest sure fail."""
    passes = [r for r, j in judged.items() if j.verdict and j.sure and low is not None and r <= low]
    fails = [r for r, j in judged.items() if j.verdict is False and j.sure]
    if high is not None:
        fails = [r for r in fails if r >= high]
    return (max(passes) if passes else None), (min(fails) if fails else None)


def next_rate(probes: Mapping[float, Sequence[Run]], rule: Rule) -> float | Bracket:
    """The rate to run next (again, when its runs so far cannot tell), or the answer."""
    judged = {rate: judge(runs, rule) for rate, runs in probes.items()}
    verdicts = {rate: j.verdict for rate, j in judged.items()}
    undecided = sorted(rate for rate, verdict in verdicts.items() if verdict is None)
    if undecided:
        return undecided[0]
    lowest = rounded(rule.min_rate)
    if lowest not in verdicts:
        return lowest
    if not verdicts[lowest]:
        return Bracket(None, lowest, *_interval(judged, None, lowest))
    failed = [rate for rate, passed in verdicts.items() if not passed]
    high = min(failed) if failed else None
    low = max(rate for rate, passed in verdicts.items() if passed and (high is None or rate < high))
    if high is None:
        top = rounded(rule.max_rate)
        if low >= top:
            return Bracket(low, None, *_interval(judged, low, None))
        return min(rounded(low * GROWTH), top)
    middle = rounded((low + high) / 2)
    if rule.width.reached(low, high) or not low < middle < high:
        return Bracket(low, high, *_interval(judged, low, high))
    return middle

