"""Each GPU on its own: utilization and memory per GPU, per configuration and user count.

A run's row pools its GPUs (gpu_util_mean_pct is the mean over all of them), which hides a
layout that keeps one GPU waiting for the other. The sampler also writes each GPU's own figures
to the run's telemetry_summary.json (``telemetry_per_gpu``); this reads them back, averages
over a cell's repeats, and draws them. Runs with one sampled GPU, or none, add nothing.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd

from loadtest.report.options import options_cell, shown_options
from loadtest.report.plots import config_label
from loadtest.report.runset import CELL, CONFIG, read_run_json
from loadtest.report.tables import markdown_table

__all__ = ["gpu_cells", "gpus_markdown", "per_gpu_rows", "plot_gpus"]

_DPI = 110


def per_gpu_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, GPU) for runs that sampled more than one GPU."""
    rows = []
    for _, run in runs.iterrows():
        gpus = read_run_json(run, "telemetry_summary.json").get("telemetry_per_gpu") or []
        if len(gpus) < 2:
            continue
        for gpu in gpus:
            rows.append({**{c: run[c] for c in CELL}, "run_id": run["run_id"],
                         "output_tok_per_s": run.get("output_tok_per_s"),
                         "gpu_index": int(gpu["gpu"]), "util_mean_pct": gpu.get("util_mean_pct"),
                         "mem_peak_mib": gpu.get("mem_peak_mib"),
                         "power_mean_w": gpu.get("power_mean_w")})
    return pd.DataFrame(rows)


def gpu_cells(rows: pd.DataFrame) -> pd.DataFrame:
    """Per cell and GPU: mean utilization (and its min-max over repeats), peak memory, power."""
    if rows.empty:
        return rows
    grouped = rows.groupby([*CELL, "gpu_index"], sort=True, dropna=False)
    return grouped.agg(runs=("run_id", "nunique"), util_mean_pct=("util_mean_pct", "mean"),
                       util_min_pct=("util_mean_pct", "min"), util_max_pct=("util_mean_pct", "max"),
                       mem_peak_mib=("mem_peak_mib", "max"), power_mean_w=("power_mean_w", "mean"),
                       tok_s=("output_tok_per_s", "mean")).reset_index()


def gpus_markdown(cells: pd.DataFrame) -> str:
    """One row per configuration and user count; per GPU its utilization and peak memory."""
    indices = sorted(cells["gpu_index"].unique())
    header = ["options", "users", "runs", "output tok/s",
              *[f"GPU {i} util % (min-max)" for i in indices],
              *[f"GPU {i} mem peak (GiB)" for i in indices],
              *[f"GPU {i} power (W)" for i in indices]]
    shown = shown_options(cells["flags"])
    body = []
    for (_, flags, gpu, users), cell in cells.groupby(CELL, sort=True, dropna=False):
        by_gpu = cell.set_index("gpu_index")
        label = options_cell(shown[flags])
        body.append([f"{label} gpu {gpu}" if gpu else label, f"{users:g}", f"{cell['runs'].max():g}",
                     _num(cell["tok_s"].iloc[0], 1),
                     *[_util(by_gpu, i) for i in indices],
                     *[_num(by_gpu["mem_peak_mib"].get(i) / 1024 if i in by_gpu.index else None, 1)
                       for i in indices],
                     *[_num(by_gpu["power_mean_w"].get(i), 0) for i in indices]])
    return markdown_table(header, body)


def plot_gpus(cells: pd.DataFrame, path: Path) -> None:
    """Per configuration, each GPU's mean utilization (left) and peak memory (right) by users."""
    if cells.empty:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for _, config in cells.groupby(CONFIG, sort=True, dropna=False):
        label = config_label(config.iloc[0])
        for index, one in config.groupby("gpu_index"):
            one = one.sort_values("users")
            style = "-" if index == 0 else "--"
            err = [one["util_mean_pct"] - one["util_min_pct"], one["util_max_pct"] - one["util_mean_pct"]]
            line = left.errorbar(one["users"], one["util_mean_pct"], yerr=err, marker="o", capsize=3,
                                 linestyle=style, label=f"{label}: GPU {index}")
            right.plot(one["users"], one["mem_peak_mib"] / 1024, marker="o", linestyle=style,
                       color=line[0].get_color(), label=f"{label}: GPU {index}")
    left.set(xlabel="users", ylabel="GPU utilization, mean over the run (%)", ylim=(0, 105),
             title="Utilization per GPU (bars: min-max over repeats)")
    right.set(xlabel="users", ylabel="GPU memory, peak (GiB)", title="Memory per GPU")
    users = sorted(set(cells["users"].dropna()))
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.set_xticks(users, [f"{u:g}" for u in users])  # the user counts run, not 2^n
        axis.grid(alpha=0.3)
    left.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)


def _util(by_gpu: pd.DataFrame, index: int) -> str:
    if index not in by_gpu.index:
        return "-"
    row = by_gpu.loc[index]
    return f"{row['util_mean_pct']:.0f} ({row['util_min_pct']:.0f}-{row['util_max_pct']:.0f})"


def _num(value: object, digits: int) -> str:
    number = pd.to_numeric(value, errors="coerce")
    return "-" if number is None or pd.isna(number) else f"{number:,.{digits}f}"
