"""PNG plots of a report, each drawn from the cell table, the runs or one run's files.

Every function writes one PNG and returns nothing; a plot with no data to draw is not written
(the caller checks the path). Times on a run's timeline are seconds since its first request.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: never open a window, works without a display

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from loadtest.report.options import short_options
from loadtest.report.runset import CONFIG

__all__ = [
    "config_label",
    "curves",
    "gpus_label",
    "plot_distributions",
    "plot_frontier",
    "plot_frontier_by_gpu",
    "plot_race",
    "plot_timeline",
    "plot_users",
]

_DPI = 110
# matplotlib 3.10 renamed boxplot's vert=False to orientation="horizontal" (and deprecated vert)
_HORIZONTAL = ({"orientation": "horizontal"}
               if tuple(int(p) for p in matplotlib.__version__.split(".")[:2]) >= (3, 10)
               else {"vert": False})


def config_label(row: pd.Series, shown: str | None = None) -> str:
    """Engine, options and gpu; the options as ``shown`` (report/options.py's shown_options,
    told apart from the others of its table), else shortened alone."""
    flags = short_options(row["flags"]) if shown is None else shown
    label = f"{row['engine']} {flags or '(defaults)'}"
    return f"{label} gpu {row['gpu']}" if row["gpu"] else label


def curves(cells: pd.DataFrame, by: list[str] | None = None
           ) -> list[tuple[str, pd.DataFrame, pd.DataFrame]]:
    """The lines across user counts, one per configuration (`by`, default CONFIG) through every
    heat (heat_cells), as (label, line, others). Where a configuration ran several workloads at
    one user count, the line goes through the one with the most requests per run (the longest,
    least noisy measurement); the others are returned apart, to be drawn as bare markers."""
    by = by or CONFIG
    lines = []
    for _, config in cells.groupby(by, sort=True, dropna=False):
        per_run = pd.to_numeric(config["requests"], errors="coerce") / config["runs"]
        order = config.assign(_per_run=per_run).sort_values(["users", "_per_run"])
        line = order.drop_duplicates("users", keep="last")
        others = order.drop(line.index)
        label = str(config["name"].iloc[0]) if "name" in by else config_label(config.iloc[0])
        lines.append((label, line.drop(columns="_per_run"), others.drop(columns="_per_run")))
    return lines


def _invalid(axis: plt.Axes, cells: pd.DataFrame, x: str, y: str) -> bool:
    """A black cross over each cell with an invalid run: drawn, but not to be trusted."""
    marked = cells[cells.get("invalid", pd.Series(0, index=cells.index)) > 0]
    axis.plot(marked[x], marked[y], linestyle="none", marker="x", markersize=9,
              markeredgewidth=2, color="black")
    return not marked.empty


def _others(axis: plt.Axes, x: pd.Series, y: pd.Series, colour: str) -> None:
    """Cells of a configuration's other workloads at a user count: hollow, off its line."""
    axis.plot(x, y, linestyle="none", marker="o", markerfacecolor="none", color=colour)


def plot_users(cells: pd.DataFrame, path: Path) -> None:
    """Completion time and output tok/s against users; error bars: sd over repeats."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    hollow = crossed = False
    for label, config, others in curves(cells):
        line = left.errorbar(config["users"], config["time_s_mean"],
                             yerr=config["time_s_sd"].fillna(0), marker="o", capsize=3,
                             label=label)[0]
        right.errorbar(config["users"], config["tok_s_mean"], yerr=config["tok_s_sd"].fillna(0),
                       marker="o", capsize=3, label=label, color=line.get_color())
        _others(left, others["users"], others["time_s_mean"], line.get_color())
        _others(right, others["users"], others["tok_s_mean"], line.get_color())
        hollow = hollow or not others.empty
        every = pd.concat([config, others])
        crossed = _invalid(left, every, "users", "time_s_mean") or crossed
        crossed = _invalid(right, every, "users", "tok_s_mean") or crossed
    if hollow:
        right.plot([], [], linestyle="none", marker="o", markerfacecolor="none", color="grey",
                   label="a shorter workload at that user count")
    if crossed:
        right.plot([], [], linestyle="none", marker="x", markeredgewidth=2, color="black",
                   label="an invalid run in the cell (see its heat)")
    for axis, title in ((left, "completion time (s)"), (right, "output tok/s")):
        _users_axis(axis, cells["users"])
        axis.set_ylabel(title)
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
    right.legend(fontsize=8, loc="best")
    fig.suptitle("Completion time and throughput against client users (error bars: sd of repeats)",
                 fontsize=10)
    _save(fig, path)


def plot_race(cells: pd.DataFrame, fastest: dict[tuple[str, float], str], path: Path,
              title: str, invalid: pd.DataFrame | None = None) -> None:
    """Output tok/s against users, one line per engine (the race cells' `name`, see `curves`:
    other workloads at a user count are hollow markers); error bars: sd over repeats; a star on
    the fastest of each heat (`fastest`: (workload_sha256, users) -> name); each `invalid` run a
    cross in its engine's colour, off the lines."""
    invalid = invalid if invalid is not None else pd.DataFrame()
    if cells.empty and invalid.empty:
        return
    engines = sorted(set(cells.get("engine", [])) | set(invalid.get("engine", [])))
    colour = {engine: f"C{index % 10}" for index, engine in enumerate(engines)}
    fig, axis = plt.subplots(figsize=(8, 4.6))
    starred = hollow = False
    for label, engine, others in (curves(cells, ["name"]) if not cells.empty else []):
        paint = colour[engine["engine"].iloc[0]]
        axis.errorbar(engine["users"], engine["tok_s_mean"], yerr=engine["tok_s_sd"].fillna(0),
                      marker="o", capsize=3, color=paint, label=label)
        _others(axis, others["users"], others["tok_s_mean"], paint)
        hollow = hollow or not others.empty
        won = engine[[fastest.get((r["workload_sha256"], r["users"])) == r["name"]
                      for _, r in engine.iterrows()]]  # stars on the line only
        starred = starred or not won.empty
        axis.plot(won["users"], won["tok_s_mean"], linestyle="none", marker="*", markersize=16,
                  color=paint, markeredgecolor="black")
        for _, cell in won.iterrows():
            axis.annotate(f"{cell['tok_s_mean']:,.0f}", (cell["users"], cell["tok_s_mean"]),
                          textcoords="offset points", xytext=(0, 10), ha="center", fontsize=8)
    for name, runs in (invalid.groupby("engine", sort=True) if not invalid.empty else []):
        axis.plot(runs["users"], pd.to_numeric(runs["output_tok_per_s"], errors="coerce"),
                  linestyle="none", marker="x", markersize=9, markeredgewidth=2,
                  color=colour[name], label=f"{name}: invalid run (never ranked)")
    users = pd.concat([cells.get("users", pd.Series(dtype=float)),
                       invalid.get("users", pd.Series(dtype=float))])
    _users_axis(axis, users)
    axis.set_ylabel("output tok/s (higher is better)")
    axis.set_ylim(bottom=0, top=axis.get_ylim()[1] * 1.08)
    axis.grid(alpha=0.3)
    if starred:
        axis.plot([], [], linestyle="none", marker="*", markersize=12, color="grey",
                  markeredgecolor="black", label="fastest at that user count")
    if hollow:
        axis.plot([], [], linestyle="none", marker="o", markerfacecolor="none", color="grey",
                  label="a shorter workload at that user count")
    axis.legend(fontsize=8, loc="best")
    axis.set_title(title, fontsize=10)
    _save(fig, path)


def plot_frontier(cells: pd.DataFrame, path: Path) -> None:
    """Output tok/s against TTFT p99 and ITL p99, one line per configuration, points = users."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    crossed = False
    for label, config, _ in curves(cells):
        for axis, column in zip(axes, ("ttft_p99_ms", "itl_p99_ms")):
            line = axis.plot(config[column], config["tok_s_mean"], marker="o", label=label)[0]
            crossed = _invalid(axis, config, column, "tok_s_mean") or crossed
            for _, cell in config.iterrows():
                axis.annotate(f"u{cell['users']:g}", (cell[column], cell["tok_s_mean"]),
                              textcoords="offset points", xytext=(4, 4), fontsize=7,
                              color=line.get_color())
    axes[0].set_xlabel("TTFT p99 (ms)")
    axes[1].set_xlabel("ITL p99 (ms)")
    axes[0].set_ylabel("output tok/s")
    for axis in axes:
        axis.grid(alpha=0.3)
        axis.set_xlim(left=0)
        axis.set_ylim(bottom=0)
    if crossed:
        axes[1].plot([], [], linestyle="none", marker="x", markeredgewidth=2, color="black",
                     label="an invalid run in the cell (see its heat)")
    axes[1].legend(fontsize=8, loc="best")
    fig.suptitle("Throughput-latency frontier (up and to the left is better; uN = N users)",
                 fontsize=10)
    _save(fig, path)


def plot_frontier_by_gpu(cells: pd.DataFrame, path: Path, title: str,
                         chosen: pd.Series | None = None) -> None:
    """Output tok/s per GPU against output tok/s per user (report/frontier.py's cells of one
    group): one colour per configuration, a label uN per point (N users), the frontier as a
    step line through its undominated cells, a star on `chosen` (a target's pick)."""
    if cells.empty:
        return
    shown = {flags: short_options(flags) for flags in cells["flags"]}
    configs = cells.groupby(CONFIG, sort=True, dropna=False)
    fig, axis = plt.subplots(figsize=(10, 5.5 + 0.16 * (configs.ngroups + 2) / 2))
    for index, (_, config) in enumerate(configs):
        paint = f"C{index % 10}"
        axis.plot(config["tok_s_per_user"], config["tok_s_per_gpu"], linestyle="none",
                  marker="o", color=paint,
                  label=f"{config_label(config.iloc[0], shown[config['flags'].iloc[0]])} "
                        f"({gpus_label(config.iloc[0])} GPU)")
        for _, cell in config.iterrows():
            axis.annotate(f"u{cell['users']:g}", (cell["tok_s_per_user"], cell["tok_s_per_gpu"]),
                          textcoords="offset points", xytext=(4, 4), fontsize=7, color=paint)
    frontier = cells[cells["on_frontier"]].sort_values("tok_s_per_user")
    axis.step(frontier["tok_s_per_user"], frontier["tok_s_per_gpu"], where="pre",
              color="black", linewidth=1, alpha=0.6, label="frontier (no cell beats it on both)")
    if chosen is not None:
        axis.plot([chosen["tok_s_per_user"]], [chosen["tok_s_per_gpu"]], linestyle="none",
                  marker="*", markersize=18, color="gold", markeredgecolor="black",
                  label="the target's pick")
    axis.set_xlabel("output tok/s per user (1000 / mean TPOT ms)")
    axis.set_ylabel("output tok/s per GPU")
    axis.set_xlim(left=0)
    axis.set_ylim(bottom=0)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    fig.suptitle("\n".join(textwrap.wrap(title, 120)), fontsize=9)
    _save(fig, path)


def gpus_label(cell: pd.Series) -> str:
    """A frontier cell's GPUs (report/frontier.py), "2 x H200": the count alone where no
    name was recorded."""
    kind = f" x {cell['gpu_kind']}" if cell.get("gpu_kind") else ""
    return f"{cell['gpus']:g}{kind}"


def plot_distributions(samples: list[tuple[str, pd.DataFrame]], path: Path) -> None:
    """Box plots of TTFT and ITL per run (whiskers 1st-99th percentile), one box per run."""
    labels, ttft, itl = [], [], []
    for label, requests in samples:
        done = requests[requests["error_kind"].isna()] if "error_kind" in requests else requests
        labels.append(label)
        ttft.append(done["ttft_ms"].dropna().to_numpy())
        gaps = [g / 1e6 for gaps in done["chunk_gaps_ns"] for g in gaps]
        itl.append(np.asarray(gaps, dtype=float))
    if not labels:
        return
    height = max(3.0, 0.28 * len(labels) + 1.5)
    fig, axes = plt.subplots(1, 2, figsize=(12, height), sharey=True)
    for axis, values, title in ((axes[0], ttft, "TTFT (ms)"), (axes[1], itl, "ITL (ms)")):
        filled = [v if len(v) else np.array([np.nan]) for v in values]
        axis.boxplot(filled, whis=(1, 99), showfliers=False, **_HORIZONTAL)
        axis.set_xlabel(title)
        axis.set_xscale("symlog", linthresh=1.0)
        axis.grid(alpha=0.3, axis="x")
    axes[0].set_yticks(range(1, len(labels) + 1), labels, fontsize=7)
    axes[0].invert_yaxis()
    fig.suptitle("Per-run TTFT and ITL (box: quartiles, whiskers: p1-p99)", fontsize=10)
    _save(fig, path)


def plot_timeline(title: str, requests: pd.DataFrame, telemetry: pd.DataFrame,
                  path: Path) -> None:
    """Each request as a bar (sent -> first token: waiting/prefill; first token -> done: decode),
    with the engine's and the GPUs' samples below on the same time axis."""
    if requests.empty:
        return
    start_s = float(requests["sent_at"].min())
    engine = _source(telemetry, "engine")
    gpu = _source(telemetry, "gpu")
    panels = 1 + (not engine.empty) * 2 + (not gpu.empty) * 2
    ratios = [3] + [1] * (panels - 1)
    fig, axes = plt.subplots(panels, 1, figsize=(11, 3.2 + 1.3 * (panels - 1)), sharex=True,
                             gridspec_kw={"height_ratios": ratios}, squeeze=False)
    axes = list(axes[:, 0])
    _draw_requests(axes[0], requests.sort_values("sent_at"), start_s)
    next_axis = 1
    if not engine.empty:
        _draw_engine(axes[next_axis], axes[next_axis + 1], engine, start_s)
        next_axis += 2
    if not gpu.empty:
        _draw_gpu(axes[next_axis], axes[next_axis + 1], gpu, start_s)
    axes[-1].set_xlabel("seconds since the first request was sent")
    axes[0].set_title(title, fontsize=10)
    _save(fig, path)


def _draw_requests(axis: plt.Axes, requests: pd.DataFrame, start_s: float) -> None:
    position = np.arange(len(requests))
    sent = requests["sent_at"].to_numpy() - start_s
    first = requests["first_chunk_at_s"].to_numpy() - start_s
    done = requests["done_at_s"].to_numpy() - start_s
    failed = requests["error_kind"].notna().to_numpy() if "error_kind" in requests else None
    wait_end = np.where(np.isnan(first), done, first)
    axis.hlines(position, sent, wait_end, color="tab:orange", lw=1.2,
                label="sent -> first token (queue + prefill)")
    axis.hlines(position, first, done, color="tab:blue", lw=1.2, label="first token -> done")
    if failed is not None and failed.any():
        axis.plot(done[failed], position[failed], "rx", ms=4, label="failed")
    axis.set_ylabel("request (by send time)")
    axis.set_ylim(len(requests), -1)
    axis.legend(fontsize=7, loc="lower right")
    axis.grid(alpha=0.3, axis="x")


def _draw_engine(counts: plt.Axes, cache: plt.Axes, engine: pd.DataFrame, start_s: float) -> None:
    t = engine["t"] - start_s
    for column, label in (("running", "running"), ("waiting", "waiting")):
        if column in engine and engine[column].notna().any():
            counts.step(t, engine[column], where="pre", label=f"engine {label}")
    counts.set_ylabel("requests")
    _legend(counts)
    counts.grid(alpha=0.3)
    if "kv_cache_pct" in engine and engine["kv_cache_pct"].notna().any():
        cache.plot(t, engine["kv_cache_pct"], color="tab:purple", label="KV cache %")
    if "queue_time_sum_s" in engine and engine["queue_time_sum_s"].notna().any():
        queue_ms = _interval_mean_ms(engine["queue_time_sum_s"], engine["queue_time_count"])
        twin = cache.twinx()
        twin.plot(t, queue_ms, color="tab:green", drawstyle="steps-post",
                  label="queue time (ms, mean per interval)")
        twin.set_ylabel("queue ms", fontsize=8)
        twin.legend(fontsize=7, loc="upper left")
    cache.set_ylabel("KV cache %")
    _legend(cache)
    cache.grid(alpha=0.3)


def _legend(axes: plt.Axes) -> None:
    """A legend where something was drawn; else say so (llama.cpp exports no KV cache share)."""
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=7, loc="upper right")
    else:
        axes.text(0.5, 0.5, "not exported by this engine", transform=axes.transAxes,
                  ha="center", va="center", fontsize=8, color="0.5")


def _interval_mean_ms(total_s: pd.Series, count: pd.Series) -> np.ndarray:
    """Mean of a Prometheus histogram over each scrape interval: d(sum) / d(count)."""
    d_sum = total_s.astype(float).diff().to_numpy()
    d_count = count.astype(float).diff().to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(d_count > 0, 1000 * d_sum / d_count, np.nan)


def _draw_gpu(usage: plt.Axes, memory: plt.Axes, gpu: pd.DataFrame, start_s: float) -> None:
    power = usage.twinx()
    for index, samples in gpu.groupby("gpu"):
        t = samples["t"] - start_s
        usage.plot(t, samples["util_pct"], label=f"GPU {index:g} util %")
        if "power_w" in samples:
            power.plot(t, samples["power_w"], ls="--", label=f"GPU {index:g} power W")
        memory.plot(t, samples["mem_used_mib"], label=f"GPU {index:g} memory MiB")
    usage.set_ylabel("util %")
    usage.set_ylim(0, 105)
    power.set_ylabel("W", fontsize=8)
    power.set_ylim(bottom=0)
    power.legend(fontsize=7, loc="upper left")
    memory.set_ylabel("MiB")
    memory.set_ylim(bottom=0)
    for axis in (usage, memory):
        axis.legend(fontsize=7, loc="upper right")
        axis.grid(alpha=0.3)


def _source(telemetry: pd.DataFrame, name: str) -> pd.DataFrame:
    if telemetry.empty or "source" not in telemetry:
        return pd.DataFrame()
    return telemetry[telemetry["source"] == name].sort_values("t")


def _users_axis(axis: plt.Axes, users: pd.Series) -> None:
    axis.set_xlabel("client users")
    values = sorted(set(users.dropna()))
    if values and values[-1] / max(values[0], 1) >= 8:
        axis.set_xscale("log", base=2)
    axis.set_xticks(values, [f"{v:g}" for v in values])


def _save(fig: plt.Figure, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)
