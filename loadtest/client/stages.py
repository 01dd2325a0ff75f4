"""Staged load: a YAML file of stages, each holding a number of users for a time.

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from loadtest.cli.types import BadValue, duration, positive_int, positive_number

__all__ = ["Stage", "StageError", "load_stages", "parse_stages", "stage_bounds"]

_KEYS = {"users", "duration", "spawn_rate", "name"}


class StageError(ValueError):
    """A stages file that cannot be run; the message is one line."""


@dataclass(frozen=True)
class Stage:
    name: str
    users: int
    duration_s: float
    spawn_rate: float | None = None  # users per second; None: the whole change at once


def load_stages(path: Path) -> list[Stage]:
    """The stages of a YAML file; StageError (one line, naming the file) when it is unusable."""
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
    if isinstance(document, dict) and set(document) == {"stages"}:
        document = document["stages"]
    if not isinstance(document, list):
        raise StageError("must be a list of stages (or `stages:` with one), "
                         f"got {type(document).__name__}")
    if not document:
        raise StageError("has no stages")
    return [_stage(i, item) for i, item in enumerate(document, start=1)]


def _stage(number: int, item: Any) -> Stage:
    if not isinstance(item, dict):
        raise StageError(f"stage {number} must be a mapping with users and duration, got {item!r}")
    unknown = sorted(str(k) for k in set(item) - _KEYS)
    if unknown:
        raise StageError(f"stage {number} has unknown keys {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(_KEYS))})")
    for key in ("users", "duration"):
        if key not in item:
            raise StageError(f"stage {number} has no {key}")
    users = _value(number, "users", item["users"], positive_int)
    seconds = _value(number, "duration", item["duration"], duration)
    spawn_rate = (None if item.get("spawn_rate") is None
                  else _value(number, "spawn_rate", item["spawn_rate"], positive_number))
    name = item.get("name", f"stage {number}")
    if not isinstance(name, str) or not name.strip():
        raise StageError(f"stage {number}: name must be text, got {name!r}")
    return Stage(name.strip(), users, seconds, spawn_rate)


def _value(number: int, key: str, value: Any, kind: Any) -> Any:
    if isinstance(value, bool):  # YAML's yes/no: never a count
        raise StageError(f"stage {number}: {key} must be a number, got {value!r}")
    try:
        return kind(value)
    except BadValue as exc:
        raise StageError(f"stage {number}: {key} {exc}") from None


def stage_bounds(stages: list[Stage]) -> list[tuple[float, float]]:
    """Each stage's [start, end) in seconds from the run's origin."""
    ends = [0.0, *(math.fsum(s.duration_s for s in stages[:i + 1]) for i in range(len(stages)))]
    return list(zip(ends[:-1], ends[1:]))
