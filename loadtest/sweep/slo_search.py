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

Nothing here runs anything (loadtest/sweep/slo.py does), so the search is tested on made-up
engines (tests/test_slo_search.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Bracket", "Rule", "Run", "Width", "next_rate", "probe_verdict", "rounded"]

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
class Rule:
    attainment_pct: float  # (0, 100]
    width: Width
    min_rate: float
    max_rate: float
    margin_pct: float = 2.0  # percentage points: a mean this close to attainment_pct is repeated
    max_repeats: int = 3  # runs of one rate at most


@dataclass(frozen=True)
class Run:
    """One run of a probe, as its runs.csv row tells it."""
    met_pct: float  # slo_met_pct
    percentiles_met: bool = True  # slo_percentiles is not "missed:..."
    kept_up: bool = True  # not saturated: answers kept pace with the schedule, sends on time


@dataclass(frozen=True)
class Bracket:
    """Where the answer lies: low passed, high failed. low None: even min_rate failed; high
    None: even max_rate passed."""
    low: float | None
    high: float | None

    @property
    def status(self) -> str:
        if self.low is None:
            return "misses at the lowest rate"
        return "at least the highest rate" if self.high is None else "found"


def rounded(rate: float) -> float:
    return float(f"{rate:.4g}")


def probe_verdict(runs: Sequence[Run], rule: Rule) -> bool | None:
    """True passed, False failed, None not known yet (run it again)."""
    if not runs:
        return None
    if not all(run.percentiles_met and run.kept_up for run in runs):
        return False
    mean = sum(run.met_pct for run in runs) / len(runs)
    close = abs(mean - rule.attainment_pct) <= rule.margin_pct and 0 < mean < 100
    if close and len(runs) < rule.max_repeats:
        return None
    return mean >= rule.attainment_pct


def next_rate(probes: Mapping[float, Sequence[Run]], rule: Rule) -> float | Bracket:
    """The rate to run next (again, when its runs so far cannot tell), or the answer."""
    verdicts = {rate: probe_verdict(runs, rule) for rate, runs in probes.items()}
    undecided = sorted(rate for rate, verdict in verdicts.items() if verdict is None)
    if undecided:
        return undecided[0]
    lowest = rounded(rule.min_rate)
    if lowest not in verdicts:
        return lowest
    if not verdicts[lowest]:
        return Bracket(None, lowest)
    failed = [rate for rate, passed in verdicts.items() if not passed]
    high = min(failed) if failed else None
    low = max(rate for rate, passed in verdicts.items() if passed and (high is None or rate < high))
    if high is None:
        top = rounded(rule.max_rate)
        return Bracket(low, None) if low >= top else min(rounded(low * GROWTH), top)
    middle = rounded((low + high) / 2)
    if rule.width.reached(low, high) or not low < middle < high:
        return Bracket(low, high)
    return middle

