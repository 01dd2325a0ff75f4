"""sweep.json: what a sweep did, rewritten atomically after every step ("save as you go").

    {"schema_version": 1, "name": ..., "kind": "threads" | "flags", "status": "running" | ...,
     "started_at": ..., "updated_at": ..., "rig_version": ..., "results": OUT, "matrix": {...},
     "configs": {SLUG: {"config_hash", "engine", "launch", "settings", "flags", "gpus",
                        "status": "ok" | "failed" | "skipped", "reason", "log_tail",
                        "engine_log", "warmup": {"requests", "users", "exit_code", "run_dir"}}},
     "cells": {CELL_ID: {"config", "users", "repeat", "dir", "status": "ok" | "failed" | "skipped",
                         "reason", "run_id", "rig_version", "workload_sha256", "exit_code"}},
     "until_known": {"max_repeats", "max_time_s", "resolve_pct", "heats": [known.csv's rows]}}
                                                          (--until-known only: loadtest/sweep/repeats.py)

A cell counts as measured, and is skipped by a re-run, only when sweep.json says so for the same
cell id (the hash of its settings and workload), with the same rig version, and its run_id is
still a row of runs.csv.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from loadtest.results.files import write_json

from loadtest.sweep.cells import Cell

__all__ = ["MEASURED", "SweepState"]

SCHEMA_VERSION = 1
MEASURED = ("ok", "skipped")


class SweepState:
    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    @classmethod
    def open(cls, path: Path, header: dict[str, Any]) -> SweepState:
        """The sweep's record, continuing an earlier one at ``path`` if there is one."""
        old: dict[str, Any] = {}
        if path.exists():
            try:
                old = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                old = {}
        data = {"schema_version": SCHEMA_VERSION, "started_at": _now(), **header,
                "configs": old.get("configs", {}), "cells": old.get("cells", {})}
        if old.get("started_at"):
            data["first_started_at"] = old.get("first_started_at", old["started_at"])
        return cls(path, data)

    def save(self) -> None:
        self.data["updated_at"] = _now()
        write_json(self.path, self.data)

    def measured_before(self, cell: Cell, rig_version: str, run_ids: set[str]) -> str | None:
        """Why ``cell`` need not run again (a reason naming its run), or None."""
        skip, reason = self.resume_check(cell, rig_version, run_ids)
        return reason if skip else None

    def resume_check(self, cell: Cell, rig_version: str, run_ids: set[str]) -> tuple[bool, str]:
        """(skip it?, why): skipped only when measured with this cell id, rig version, and row."""
        old = self.data["cells"].get(cell.cell_id)
        if not old:
            return False, ""
        if old.get("status") not in MEASURED:
            return False, f"{old.get('status', 'not measured')} before: {old.get('reason', '')}".rstrip(": ")
        if old.get("rig_version") != rig_version:
            return False, f"measured by rig {old.get('rig_version')}, this is {rig_version}"
        if old.get("run_id") not in run_ids:
            return False, f"its run {old.get('run_id')} is no longer in runs.csv"
        return True, f"measured before by run {old['run_id']}"

    def set_cell(self, cell: Cell, **fields: Any) -> None:
        entry = self.data["cells"].setdefault(cell.cell_id, {})
        entry.update({"config": cell.slug, "users": cell.users, "repeat": cell.repeat,
                      "dir": cell.path, **fields})
        if fields.get("status") in ("failed", "pending"):
            entry.pop("run_id", None)  # an old run no longer stands for this cell
        self.save()

    def set_config(self, slug: str, **fields: Any) -> None:
        self.data["configs"].setdefault(slug, {}).update(fields)
        self.save()

    def cell(self, cell: Cell) -> dict[str, Any]:
        return self.data["cells"].get(cell.cell_id, {})


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

