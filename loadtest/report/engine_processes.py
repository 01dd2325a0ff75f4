"""The engine's busiest host processes, per configuration and user count.

A layout can be held back by one process on the host (vLLM's single API server at a full core)
while its GPUs wait, which neither the GPUs' utilization nor the runs table shows. Each run the
rig measured on the engine's host lists in its run.json (``engine_processes``, from
loadtest/client/engine_cpu.py) every process of the engine's trees that used 1% of a core or
more; this reads them back, groups them by name (replicas' processes of one name together, and
numbered siblings as one: vLLM's ``VLLM::Worker_TP0`` and ``_TP1`` are ``VLLM::Worker_TPN`` x2,
so four GPU workers cannot crowd the API server out of the table), the busiest counted, and
gives each name's share of a core over the cell's repeats. Runs without that list (engines
elsewhere, older runs) add nothing. Beside them, the busiest API server's share
(``engine_front_end_cpu_max_pct``), which the top names can hide where GPU workers spin at a
full core.
"""

from __future__ import annotations

import re

import pandas as pd

from loadtest.report.options import options_cell, shown_options
from loadtest.report.runset import CELL, read_run_json
from loadtest.report.tables import markdown_table

__all__ = ["FRONT_END", "TOP", "engine_process_cells", "engine_process_rows",
           "engine_processes_markdown", "front_end_cells", "process_family"]

TOP = 4  # names shown per cell, busiest first
FRONT_END = "engine_front_end_cpu_max_pct"
_NUMBERED = re.compile(r"(_[A-Za-z]*)\d+$")  # APIServer_0, Worker_TP1, EngineCore_DP3


def process_family(name: str) -> str:
    """The name with a trailing sibling number made N: `VLLM::Worker_TP1` -> `VLLM::Worker_TPN`
    (only after an underscore: `python3` stays itself)."""
    return _NUMBERED.sub(r"\1N", name)


def engine_process_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, process name): the busiest such process's % of a core, and how many
    processes of that name the run had at 1% or more."""
    rows = []
    for _, run in runs.iterrows():
        listed = read_run_json(run, "run.json").get("engine_processes")
        if not isinstance(listed, list):
            continue
        by_name: dict[str, list[float]] = {}
        for process in listed:
            name = process_family(str(process.get("name")))
            by_name.setdefault(name, []).append(float(process["cpu_pct"]))
        for name, shares in by_name.items():
            rows.append({**{c: run[c] for c in CELL}, "run_id": run["run_id"], "name": name,
                         "cpu_pct": max(shares), "processes": len(shares)})
    return pd.DataFrame(rows)


def engine_process_cells(rows: pd.DataFrame) -> pd.DataFrame:
    """Per cell and process name: the mean, min and max over the cell's repeats of its busiest
    process's share of a core (a repeat where no such process reached 1% counts as absent)."""
    if rows.empty:
        return rows
    grouped = rows.groupby([*CELL, "name"], sort=True, dropna=False)
    cells = grouped.agg(runs=("run_id", "nunique"), cpu_mean_pct=("cpu_pct", "mean"),
                        cpu_min_pct=("cpu_pct", "min"), cpu_max_pct=("cpu_pct", "max"),
                        processes=("processes", "max")).reset_index()
    measured = rows.groupby(CELL, sort=True, dropna=False)["run_id"].nunique()
    return cells.merge(measured.rename("cell_runs").reset_index(), on=CELL, how="left")


def front_end_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """Per cell: the mean, min and max over its repeats of the busiest API server's share of a
    core; no row for a cell whose runs measured none."""
    if FRONT_END not in runs:
        return pd.DataFrame(columns=[*CELL, "mean", "min", "max"])
    measured = runs.dropna(subset=[FRONT_END]).astype({FRONT_END: float})
    return (measured.groupby(CELL, sort=True, dropna=False)[FRONT_END]
            .agg(["mean", "min", "max"]).reset_index())


def engine_processes_markdown(cells: pd.DataFrame, front_ends: pd.DataFrame) -> str:
    """One row per configuration and user count: its TOP busiest process names, and the
    busiest API server's share where ``front_ends`` (front_end_cells) has the cell's."""
    fronts = {tuple(row[c] for c in CELL): row for _, row in front_ends.iterrows()}
    header = ["options", "users", "runs", *(["busiest API server (% of a core)"] if fronts else []),
              "busiest engine processes (% of a core, min-max over repeats)"]
    shown = shown_options(cells["flags"])
    body = []
    for key, cell in cells.groupby(CELL, sort=True, dropna=False):
        _, flags, gpu, users = key
        label = options_cell(shown[flags])
        top = cell.sort_values("cpu_mean_pct", ascending=False).head(TOP)
        front = [_share(fronts[key]) if key in fronts else "-"] if fronts else []
        body.append([f"{label} gpu {gpu}" if gpu else label, f"{users:g}",
                     f"{cell['cell_runs'].max():g}", *front,
                     ", ".join(_process(p) for _, p in top.iterrows())])
    return markdown_table(header, body)


def _share(row: pd.Series) -> str:
    """`94% (91-95)`: the mean over repeats, and their min-max where they differ."""
    spread = f" ({row['min']:.0f}-{row['max']:.0f})" if round(row["min"]) != round(row["max"]) else ""
    return f"{row['mean']:.0f}%{spread}"


def _process(row: pd.Series) -> str:
    """`VLLM::EngineCore 97% (95-99)`; x2: two processes of that name in a run (replicas)."""
    count = f" x{row['processes']:g}" if row["processes"] > 1 else ""
    spread = (f" ({row['cpu_min_pct']:.0f}-{row['cpu_max_pct']:.0f})"
              if row["runs"] > 1 and round(row["cpu_min_pct"]) != round(row["cpu_max_pct"]) else "")
    return f"`{row['name']}`{count} {row['cpu_mean_pct']:.0f}%{spread}"
