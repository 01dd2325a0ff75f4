"""Cells: one (engine configuration, user count, repeat), named after its parameters.

A configuration's folder reads like its settings (``vllm-cpu-maxconcurrentrequests2``), a cell's
like its place in the sweep (``u32-r1``). Resume never trusts a path: a cell's id is a hash of
everything that shapes its result (engine, launch, settings, GPUs, replicas, workload hash and
options, users, repeat), and the rig version is compared beside it (loadtest/sweep/state.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from servers.registry import ENGINES

from loadtest.sweep.matrix import EngineConfig, Matrix, SweepWorkload

__all__ = ["Cell", "again", "config_hash", "config_slug", "expand_cells", "flags_text",
           "unique_slugs"]


@dataclass(frozen=True)
class Cell:
    config: EngineConfig
    slug: str  # the configuration's folder name
    users: int
    repeat: int
    cell_id: str
    workload: SweepWorkload | None = None  # one of the matrix's `workloads:`; None: `workload:`

    @property
    def name(self) -> str:
        label = self.workload.label if self.workload is not None else ""
        return f"{label + '-' if label else ''}u{self.users}-r{self.repeat}"

    @property
    def path(self) -> str:
        return f"{self.slug}/{self.name}"


def config_hash(config: EngineConfig) -> str:
    """What makes two configurations the same engine: not the port, network or folder name."""
    key = {"engine": config.engine, "launch": "local" if config.launch == "local" else "server",
           "settings": config.settings, "gpus": config.gpus, "replicas": config.replicas,
           "host": config.host, "flags": config.flags_text}
    return _digest(key)


def flags_text(config: EngineConfig) -> str:
    """The runs.csv `flags` value: settings as sorted NAME=VALUE words (the report groups by it)."""
    if config.launch == "running":
        return config.flags_text
    words = [f"{k}={v}" for k, v in sorted(config.settings.items())]
    if config.replicas:
        words.append(f"REPLICAS={config.replicas}")
    return " ".join(words)


def run_flags(config: EngineConfig) -> str | None:
    """The `--flags` a cell's run is given: flags_text, but none for an engine already running
    that was told none, so the run records what the rig started it with (where it did)."""
    text = flags_text(config)
    return None if config.launch == "running" and not text else text


def config_slug(config: EngineConfig) -> str:
    parts = [config.engine]
    for name in config.swept:
        value = config.settings.get(name, "none")
        parts.append(f"{_short(config.engine, name)}{_safe(value)}")
    if config.gpus and (config.gpus != "0" or config.replicas):
        parts.append("gpu" + config.gpus.replace(",", "_"))
    if config.replicas:
        parts.append("replicas" if config.replicas == "per-gpu" else f"replicas{config.replicas}")
    return "-".join(parts)


def unique_slugs(configs: tuple[EngineConfig, ...]) -> list[str]:
    """Folder names for ``configs``; two alike names get the configuration hash appended."""
    slugs = [config_slug(c) for c in configs]
    return [f"{s}-{config_hash(c)[:6]}" if slugs.count(s) > 1 else s for s, c in zip(slugs, configs)]


def expand_cells(matrix: Matrix, workload_sha256: str | Mapping[Any, str]
                 ) -> list[tuple[EngineConfig, str, list[Cell]]]:
    """Every configuration with its folder name and cells, in run order (workloads, users,
    then repeats). ``workload_sha256``: the workload's hash, or one per user count
    (requests_per_user), or per (workload label, user count) with several `workloads:`."""
    sha = workload_sha256 if isinstance(workload_sha256, Mapping) \
        else dict.fromkeys(matrix.users, workload_sha256)
    out = []
    for config, slug in zip(matrix.configs, unique_slugs(matrix.configs)):
        base = config_hash(config)
        cells = [Cell(config, slug, users, repeat,
                      _cell_id(base, workload, sha.get((workload.label, users), sha.get(users, "")),
                               users, repeat),
                      workload if matrix.workloads else None)
                 for workload in matrix.all_workloads
                 for users in matrix.users for repeat in range(1, matrix.repeats + 1)]
        out.append((config, slug, cells))
    return out


def again(cell: Cell, workload: SweepWorkload, workload_sha256: str) -> Cell:
    """``cell``'s next repeat (--until-known), with the id expand_cells gives that repeat: a
    matrix whose `repeats:` grows to it measures the same cell."""
    repeat = cell.repeat + 1
    return replace(cell, repeat=repeat, cell_id=_cell_id(config_hash(cell.config), workload,
                                                         workload_sha256, cell.users, repeat))


def _cell_id(config_digest: str, workload: SweepWorkload, workload_sha256: str,
             users: int, repeat: int) -> str:
    return _digest({"config": config_digest, "workload": workload.identity(),
                    "workload_sha256": workload_sha256, "users": users, "repeat": repeat})


def _digest(data: object) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _short(engine: str, setting: str) -> str:
    """The engine's own flag for a setting when it is one word (--max-num-seqs -> maxnumseqs)."""
    template = ENGINES[engine].flags.get(setting, ())
    word = template[0] if len(template) == 2 and template[1] == "{}" else setting
    return "".join(c for c in word.lower() if c.isalnum())


def _safe(value: str) -> str:
    return "".join(c if c.isalnum() or c in "._" else "_" for c in value) or "none"
