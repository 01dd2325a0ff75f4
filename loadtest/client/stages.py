"""Staged load: a YAML file of stages, each holding a number of users (or a rate) for a time.

    stages:                      # or the list alone
      - {users: 4, duration: 30s}                   # a step: all 4 at once
      - {users: 32, duration: 2m, spawn_rate: 0.5}  # a ramp: one more user every 2 s
      - {users: 128, duration: 20s}                 # a spike
      - {users: 8, duration: 1m, name: recovery}

Each stage: `users` (a positive whole number), `duration` (seconds or with a unit: 30, 30s, 2m),
optional `spawn_rate` (users started or stopped per second; default: the whole change at once)
and `name` (default `stage N`). The stages run one after another through Locust's own
LoadTestShape (loadtest/client/shape.py); the run's figures are cut per stage
(loadtest/results/window.py). Parsing imports no Locust, so `rig run` checks a file before
anything starts.

Open loop instead: every stage gives `rate` (requests per second) in place of `users`, and
optionally `arrival` (poisson, the default, or constant); --users caps the requests in flight
throughout. The whole schedule is drawn before the run (stage_offsets_ns: Poisson gaps from a
generator seeded with 0), so the same file gives the same sends every run.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.toolkit.types import BadValue, duration, positive_int, positive_number

__all__ = ["Stage", "StageError", "load_stages", "parse_stages", "stage_bounds", "stage_offsets_ns"]

_KEYS = {"users", "rate", "arrival", "duration", "spawn_rate", "name"}
_ARRIVALS = ("poisson", "constant")


class StageError(ValueError):
    """A stages file that cannot be run; the message is one line."""


@dataclass(frozen=True)
class Stage:
    name: str
    users: int | None  # None: an open-loop stage (rate)
    duration_s: float
    spawn_rate: float | None = None  # users per second; None: the whole change at once
    rate: float | None = None  # requests per second (open loop)
    arrival: str = "poisson"


def load_stages(path: Path) -> list[Stage]:
    """The stages of a YAML file; StageError (one line, naming the file) when it is unusable."""
    import yaml  # here, not above: the run's options register without PyYAML
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise StageError(f"--stages {str(path)!r}: cannot be read ({exc.strerror})") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        raise StageError(f"--stages {str(path)!r} is not YAML{line}") from None
    try:
        return parse_stages(document)
    except StageError as exc:
        raise StageError(f"--stages {str(path)!r}: {exc}") from None


def parse_stages(document: Any) -> list[Stage]:
    """The stages of a parsed YAML document: a list of stages, or a mapping with one `stages`."""
    if document is None:
        raise StageError("has no stages (it is empty)")
    if isinstance(document, dict) and set(document) == {"stages"}:
        document = document["stages"]
    if not isinstance(document, list):
        raise StageError("must be a list of stages (or `stages:` with one), "
                         f"got {type(document).__name__}")
    if not document:
        raise StageError("has no stages")
    stages = [_stage(i, item) for i, item in enumerate(document, start=1)]
    if len({s.rate is None for s in stages}) > 1:
        raise StageError("mixes users and rate stages: give every stage users, or every one rate")
    return stages


def _stage(number: int, item: Any) -> Stage:
    if not isinstance(item, dict):
        raise StageError(f"stage {number} must be a mapping with users and duration, got {item!r}")
    unknown = sorted(str(k) for k in set(item) - _KEYS)
    if unknown:
        raise StageError(f"stage {number} has unknown keys {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(_KEYS))})")
    if "duration" not in item:
        raise StageError(f"stage {number} has no duration")
    if ("users" in item) == ("rate" in item):
        raise StageError(f"stage {number} needs users (closed loop) or rate (open loop), one of them")
    seconds = _value(number, "duration", item["duration"], duration)
    name = item.get("name", f"stage {number}")
    if not isinstance(name, str) or not name.strip():
        raise StageError(f"stage {number}: name must be text, got {name!r}")
    if "rate" in item:
        if "spawn_rate" in item:
            raise StageError(f"stage {number}: spawn_rate starts users; a rate stage's users are "
                             "--users throughout")
        arrival = item.get("arrival", "poisson")
        if arrival not in _ARRIVALS:
            raise StageError(f"stage {number}: arrival must be one of {', '.join(_ARRIVALS)}, "
                             f"got {arrival!r}")
        rate = _value(number, "rate", item["rate"], positive_number)
        return Stage(name.strip(), None, seconds, rate=rate, arrival=arrival)
    if "arrival" in item:
        raise StageError(f"stage {number}: arrival shapes a rate stage; this one gives users")
    users = _value(number, "users", item["users"], positive_int)
    spawn_rate = (None if item.get("spawn_rate") is None
                  else _value(number, "spawn_rate", item["spawn_rate"], positive_number))
    return Stage(name.strip(), users, seconds, spawn_rate)


def _value(number: int, key: str, value: Any, kind: Any) -> Any:
    if isinstance(value, bool):  # YAML's yes/no: never a count
        raise StageError(f"stage {number}: {key} must be a number, got {value!r}")
    try:
        return kind(value)
    except BadValue as exc:
        raise StageError(f"stage {number}: {key} {exc}") from None


def stage_offsets_ns(stages: list[Stage], seed: int = 0) -> list[int]:
    """Open-loop stages: every send's offset from the origin, each stage at its own rate from
    its own start (constant: evenly spaced; poisson: exponential gaps, one seeded generator)."""
    rng = random.Random(seed)
    offsets: list[int] = []
    for stage, (start, end) in zip(stages, stage_bounds(stages)):
        assert stage.rate is not None
        t, sends = start, 0
        while t < end:
            offsets.append(round(t * 1e9))
            sends += 1
            # constant: the n-th send at start + n / rate, not a sum of n gaps (0.2 added ten
            # times is 1.9999...: one send too many at a stage's end)
            t = (start + sends / stage.rate if stage.arrival == "constant"
                 else t + rng.expovariate(stage.rate))
    return offsets


def stage_bounds(stages: list[Stage]) -> list[tuple[float, float]]:
    """Each stage's [start, end) in seconds from the run's origin."""
    ends = [0.0, *(math.fsum(s.duration_s for s in stages[:i + 1]) for i in range(len(stages)))]
    return list(zip(ends[:-1], ends[1:]))
