"""A target a configuration must meet (`rig report --target`): bounds on a run's measures.

    ttft_p99_ms<=2000,tok_s_per_user>=30

Each bound is METRIC OP NUMBER, OP one of <=, >=, <, >, bounds joined by commas. A metric is a
number of a runs.csv row (loadtest/results/schema.py: ttft_p99_ms, itl_p99_ms, e2e_p99_ms, ...)
or one the frontier derives per run (DERIVED: tok_s_per_user, tok_s_per_gpu, usd_per_m_tokens,
kwh_per_m_tokens; docs/measurement.md defines them). A configuration meets the target when
every bound holds in every one of its repeats (loadtest/report/frontier.py judges it).
Standard library only: the option is checked before pandas loads.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from loadtest.results.schema import COLUMNS
from loadtest.toolkit.types import BadValue

__all__ = ["DERIVED", "METRICS", "Bound", "parse_target"]

# measures the frontier derives from a run's row (loadtest/report/frontier.py)
DERIVED = {
    "tok_s_per_user": "output tok/s per user: 1000 / tpot_mean_ms",
    "tok_s_per_gpu": "output tok/s per GPU: output_tok_per_s / the run's GPUs",
    "usd_per_m_tokens": "dollars per million output tokens (needs a GPU-hour price)",
    "kwh_per_m_tokens": "GPU kWh per million output tokens: gpu_j_per_output_token / 3.6",
}
METRICS = frozenset(DERIVED) | {c.name for c in COLUMNS if c.type in (int, float)}
_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}
_BOUND = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|<|>)\s*(\S+?)\s*")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class Bound:
    """One bound of a target: `metric` `op` `limit`, e.g. ttft_p99_ms <= 2000."""
    metric: str
    op: str
    limit: float

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.limit:g}"

    @property
    def upper(self) -> bool:
        """True for a ceiling (<=, <): the highest repeat is the one that can miss it."""
        return self.op.startswith("<")

    def met(self, value: float) -> bool:
        return _OPERATORS[self.op](value, self.limit)

    def miss(self, value: float) -> float:
        """How far `value` is past the limit, as a share of the limit (0 where it is met; the
        distance itself for a limit of 0)."""
        if self.met(value):
            return 0.0
        return abs(value - self.limit) / (abs(self.limit) or 1.0)


def parse_target(text: object) -> tuple[Bound, ...]:
    """The bounds of a --target value; BadValue, in one line, for anything else."""
    given = str(text)
    if not given.strip():
        raise BadValue("must be bounds like ttft_p99_ms<=2000,tok_s_per_user>=30, got ''")
    bounds = []
    for part in given.split(","):
        found = _BOUND.fullmatch(part)
        if not found:
            raise BadValue(f"must be METRIC<=NUMBER (or >=, <, >) joined by commas, got "
                           f"{part!r} in {given!r}")
        metric, op, number = found.groups()
        if metric not in METRICS:
            raise BadValue(f"{metric!r} is no metric: use a number column of runs.csv "
                           f"(ttft_p99_ms, itl_p99_ms, ...) or one of {', '.join(DERIVED)}")
        if not _NUMBER.fullmatch(number) or not math.isfinite(float(number)):
            raise BadValue(f"{metric}{op} needs a finite number, got {number!r}")
        bounds.append(Bound(metric, op, float(number)))
    return tuple(bounds)
