"""RunSpec: one measured run of the locustfile, described once, and its one Locust command.

Every command that runs the fixed workload against an engine (rig run, the race, the sweeps,
calibration, the benches) describes the run as a RunSpec and gets its command from `command`,
the only place a Locust argument list is built (loadtest/launch/command.py assembles it).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from loadtest.launch.command import LOCUSTFILE, locust_command
from loadtest.launch.options import changed_options, option_arguments, option_dests

__all__ = ["RunSpec", "command"]

# The locustfile options a RunSpec names as fields; every other one goes in `options`.
_TYPED = ("engine", "requests", "out", "tag", "flags", "repeat", "warmup")


@dataclass(frozen=True)
class RunSpec:
    """One run: the engine and workload (locustfile options), the load (Locust's users, spawn
    rate, processes) and where the client runs. A field left None is left to the locustfile's
    default; `options` holds the locustfile's other options by dest ({"max_tokens": 128}),
    `locust_options` Locust's own arguments passed as given (a user's arguments after `--`)."""

    engine: str
    out: Path | None = None
    host: str = ""  # "": the engine's default URL
    users: int = 1
    requests: int | None = None
    tag: str | None = None
    flags: str | None = None
    repeat: int | None = None
    warmup: bool = False  # a warm-up run: never in runs.csv
    spawn_rate: float | None = None
    processes: int | None = None
    only_summary: bool = False
    options: tuple[tuple[str, Any], ...] = ()
    locust_options: tuple[str, ...] = ()
    cpus: str | None = None  # pin the client to this Linux CPU list
    python: str | None = None
    locust: tuple[str, ...] | None = None  # a command that runs Locust, for `PY -m locust`
    locustfile: Path = LOCUSTFILE  # another checkout's, to run its rig
    cwd: Path | None = None  # where Locust starts (default: here)
    environ: tuple[tuple[str, str], ...] = ()  # variables set for the run, over this process's

    @classmethod
    def of(cls, **values: Any) -> RunSpec:
        """A RunSpec from keyword arguments (or a dict): its fields, and any locustfile option by
        dest (`max_tokens=128`, `keep_outputs=True`); ValueError on a name that is neither."""
        names = {f.name for f in fields(cls)}
        options = {k: v for k, v in values.items() if k not in names}
        unknown = set(options) - option_dests()
        if unknown:
            raise ValueError(f"not a run option: {', '.join(sorted(unknown))}")
        given = {k: v for k, v in values.items() if k in names and k != "options"}
        merged = {**dict(values.get("options", ())), **options}
        return cls(**given, options=tuple(merged.items()))

    @classmethod
    def from_options(cls, args: argparse.Namespace, **values: Any) -> RunSpec:
        """A RunSpec from options parsed by the locustfile's registrar: the ones that differ
        from their defaults, then `values` over them."""
        changed = changed_options(args)
        typed = {k: changed.pop(k) for k in _TYPED if k in changed}
        return cls.of(**{"engine": args.engine, **typed, "options": tuple(changed.items()),
                         **values})

    def with_(self, **values: Any) -> RunSpec:
        """This run with some fields, or locustfile options by dest, changed."""
        return RunSpec.of(**{**{f.name: getattr(self, f.name) for f in fields(self)}, **values})

    @property
    def runs_csv(self) -> Path:
        """The runs.csv the run adds its row to (a relative --out is Locust's, under `cwd`)."""
        return (self.cwd or Path()) / (self.out if self.out is not None else "results") / "runs.csv"

    def rig_options(self) -> dict[str, Any]:
        """Every locustfile option this run sets, by dest."""
        typed = {k: getattr(self, k) for k in _TYPED}
        typed = {k: v for k, v in typed.items() if v is not None and v is not False}
        return {**typed, **dict(self.options)}


def command(spec: RunSpec) -> list[str]:
    """The run's Locust command: the one mapper from a RunSpec to Locust's arguments."""
    own: Sequence[str] = ["--only-summary"] if spec.only_summary else []
    return locust_command(host=spec.host, users=spec.users,
                          rig_options=[*own, *option_arguments(spec.rig_options()),
                                       *spec.locust_options],
                          processes=spec.processes, cpus=spec.cpus, python=spec.python,
                          spawn_rate=spec.spawn_rate, locust=spec.locust,
                          locustfile=spec.locustfile)

