"""The frontier by GPU: which configurations no other beats on both speed per user and
throughput per GPU, the one a target picks, and what a million tokens cost on each.

- Each valid closed-loop run is placed at (output tok/s per user, output tok/s per GPU):
  per user = 1000 / tpot_mean_ms (the mean over completed requests of (e2e - TTFT) /
  (output tokens - 1): the decode rate a user sees once the first token is in); per GPU =
  output_tok_per_s / the run's GPUs (gpu_count below).
- A cell is a configuration (engine, flags, gpu) at one user count; its point is the mean of
  its placed repeats. Cells are compared within one model and one request shape (the workload
  less its request count: a sweep that raises the count with the users is one shape), never
  across them. A cell is on the frontier when no cell of its group has as much of both and
  more of one.
- Left out, and named with the reason: invalid runs (their verdict_reasons), runs with failed
  requests, runs whose GPU count or per-user rate is unknown. Open-loop runs (--rate) have
  their own section and are not placed.
- A target (loadtest/report/target.py) picks, per group, the cell with the most tok/s per GPU
  whose every repeat meets every bound; a cell with a left-out repeat is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from loadtest.report.cost import GpuPrices, kwh_per_m_tokens, usd_per_m_tokens
from loadtest.report.options import options_cell, shown_options
from loadtest.report.plots import config_label, gpus_label
from loadtest.report.runset import CELL, MODEL
from loadtest.report.target import Bound
from loadtest.report.tables import _number, markdown_table

__all__ = ["GROUP", "frontier_cells", "frontier_markdown", "gpu_count", "group_label",
           "left_out_markdown", "measure_runs", "target_lines"]

# what one request of a workload is, whatever the number of requests
_SHAPE = ["workload_source", "prompts", "input_len", "output_len", "max_tokens", "prefix_groups",
          "prefix_len", "think_time_s", "ignore_eos", "api"]
GROUP = [MODEL, "shape"]
_KEY = [*GROUP, *CELL]
_CLOSEST_SHOWN = 5  # configurations a console line lists as closest to a target


def gpu_count(run: pd.Series) -> tuple[int | None, str]:
    """The GPUs a run's engine had, or None and why not: the NVML indices given as --gpu
    (`gpu`, "0,1": 2); else the GPUs its telemetry sampled where that is one (a host with one
    GPU); else unknown (several GPUs visible and no --gpu: which the engine used is not
    recorded)."""
    told = str(run.get("gpu") or "").strip()
    parts = [part.strip() for part in told.split(",")]
    if told and all(part.isdigit() for part in parts):
        return len(set(parts)), ""
    sampled = pd.to_numeric(pd.Series([run.get("gpu_count")]), errors="coerce").iloc[0]
    if sampled == 1:
        return 1, ""
    if pd.notna(sampled) and sampled > 1:
        return None, (f"GPU count unknown: no --gpu recorded and {sampled:g} GPUs visible "
                      "(which the engine used is not recorded)")
    return None, "GPU count unknown: no --gpu recorded and no GPU telemetry"


def measure_runs(runs: pd.DataFrame, prices: GpuPrices | None) -> pd.DataFrame:
    """`runs` with each run's frontier measures: `gpus`, `tok_s_per_user`, `tok_s_per_gpu`,
    `usd_per_m_tokens`, `kwh_per_m_tokens` (NaN where not known), `no_usd` / `no_kwh` (why
    not), `shape` (its request shape) and `left_out` (why it is not placed; "" if placed)."""
    measures = pd.DataFrame([_measures(run, prices) for _, run in runs.iterrows()],
                            index=runs.index).assign(shape=_shapes(runs))
    return pd.concat([runs.drop(columns=measures.columns, errors="ignore"), measures], axis=1)


def _measures(run: pd.Series, prices: GpuPrices | None) -> dict[str, Any]:
    gpus, no_gpus = gpu_count(run)
    tok_s = _float(run.get("output_tok_per_s"))
    tpot = _float(run.get("tpot_mean_ms"))
    per_user = 1000 / tpot if tpot > 0 else np.nan
    per_gpu = tok_s / gpus if gpus else np.nan
    usd, no_usd = np.nan, "no GPU-hour price given"
    if prices is not None:
        hourly, no_usd = (prices.hourly(_gpu_names(run), gpus) if gpus
                          else (None, no_gpus))
        usd = usd_per_m_tokens(hourly, tok_s) if hourly is not None else np.nan
    j_per_token = _float(run.get("gpu_j_per_output_token"))
    kwh = kwh_per_m_tokens(j_per_token) if pd.notna(j_per_token) else np.nan
    no_kwh = "" if pd.notna(kwh) else (
        f"no GPU energy (telemetry_gpu {run.get('telemetry_gpu') or 'not recorded'})")
    return {"gpus": gpus if gpus else np.nan, "gpu_kind": _kind(_gpu_names(run)),
            "tok_s_per_user": per_user,
            "tok_s_per_gpu": per_gpu, "usd_per_m_tokens": usd, "no_usd": no_usd,
            "kwh_per_m_tokens": kwh, "no_kwh": no_kwh,
            "left_out": _left_out(run, no_gpus, per_user)}


def _left_out(run: pd.Series, no_gpus: str, per_user: float) -> str:
    if str(run.get("verdict") or "").strip().lower() == "invalid":
        reasons = str(run.get("verdict_reasons") or "").replace(";", ", ")
        return f"invalid ({reasons or 'no reason recorded'})"
    failed = _float(run.get("failed"))
    if failed > 0:
        return f"failed {failed:g} of {_float(run.get('requests')):g} requests"
    if no_gpus:
        return no_gpus
    if pd.isna(per_user):
        return "tok/s per user unknown: no tpot_mean_ms (an older rig's row)"
    return ""


def _gpu_names(run: pd.Series) -> list[str]:
    """NVML's names of the run's GPUs (`gpu_names`: "0:NVIDIA H200;1:NVIDIA H200"), those of
    the --gpu indices where given."""
    told = {part.strip() for part in str(run.get("gpu") or "").split(",")}
    names = []
    for entry in str(run.get("gpu_names") or "").split(";"):
        index, _, name = entry.partition(":")
        if name and (index.strip() in told or not told - {""}):
            names.append(name.strip())
    return names


def _kind(names: list[str]) -> str:
    """The GPUs' names, less the vendor's ("H200", "H100 80GB HBM3"); "" where not recorded."""
    return " + ".join(sorted({name.removeprefix("NVIDIA ") for name in names}))


def _shapes(runs: pd.DataFrame) -> list[str]:
    """Each run's request shape as text: the _SHAPE columns it recorded ("max_tokens 128; ...")."""
    columns = [c for c in _SHAPE if c in runs]
    return ["; ".join(f"{c} {_text(run[c])}" for c in columns if _text(run[c]))
            for _, run in runs.iterrows()]


def _text(value: object) -> str:
    if isinstance(value, float):
        return "" if np.isnan(value) else f"{value:g}"
    return "" if pd.isna(value) else str(value)


def frontier_cells(measured: pd.DataFrame) -> pd.DataFrame:
    """One row per placed cell: the means of its placed repeats, their number (`runs`), the
    spread of tok/s per GPU, its left-out repeats (`left_out_runs`, `left_out_why`) and
    whether it is `on_frontier` of its group."""
    placed = measured[measured["left_out"] == ""]
    if placed.empty:
        return pd.DataFrame()
    left = measured[measured["left_out"] != ""].groupby(_KEY, dropna=False)["left_out"]
    left_count, left_why = left.size(), left.agg(lambda s: "; ".join(sorted(set(s))))
    rows = []
    for key, repeats in placed.groupby(_KEY, sort=True, dropna=False):
        row = dict(zip(_KEY, key))
        row.update(runs=len(repeats), gpus=repeats["gpus"].iloc[0],
                   gpu_kind=repeats["gpu_kind"].iloc[0],
                   tok_s_per_gpu_sd=repeats["tok_s_per_gpu"].std(ddof=1),
                   no_usd=_first_reason(repeats["no_usd"]), no_kwh=_first_reason(repeats["no_kwh"]),
                   run_ids=";".join(repeats["run_id"]), workloads=", ".join(
                       sorted(set(repeats["workload"].astype(str)))),
                   left_out_runs=int(left_count.get(key, 0)), left_out_why=left_why.get(key, ""))
        for column in ("tok_s_per_user", "tok_s_per_gpu", "ttft_p99_ms", "usd_per_m_tokens",
                       "kwh_per_m_tokens"):
            row[column] = pd.to_numeric(repeats[column], errors="coerce").mean()
        rows.append(row)
    cells = pd.DataFrame(rows)
    cells["on_frontier"] = False
    for _, group in cells.groupby(GROUP, sort=False):
        cells.loc[group.index, "on_frontier"] = _undominated(
            group["tok_s_per_user"].to_numpy(), group["tok_s_per_gpu"].to_numpy())
    return cells


def _undominated(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """True where no other point has as much of both and more of one."""
    at_least = (x[None, :] >= x[:, None]) & (y[None, :] >= y[:, None])
    more = (x[None, :] > x[:, None]) | (y[None, :] > y[:, None])
    return ~(at_least & more).any(axis=1)


def _first_reason(reasons: pd.Series) -> str:
    given = [r for r in reasons.astype(str) if r]
    return given[0] if given else ""


def group_label(group: pd.DataFrame, model: str) -> str:
    """A group for a person: its model, its workloads and their request shape."""
    workloads = ", ".join(sorted({w for text in group["workloads"] for w in text.split(", ")}))
    return f"{model}: {workloads} ({group['shape'].iloc[0] or 'shape not recorded'})"


def frontier_markdown(group: pd.DataFrame, priced: bool) -> str:
    """The group's frontier, best per user first: configuration, GPUs, users, both rates,
    TTFT p99, cost and energy (or why not), repeats."""
    shown = shown_options(group["flags"])
    frontier = group[group["on_frontier"]].sort_values("tok_s_per_user", ascending=False)
    header = ["platform", "options", "gpu", "GPUs", "users", "tok/s per user", "tok/s per GPU",
              "TTFT p99 (ms)", *(["$/M output tokens"] if priced else []),
              "kWh/M output tokens", "repeats", "notes"]
    body = []
    for _, cell in frontier.iterrows():
        body.append([str(cell["engine"]), options_cell(shown[cell["flags"]]),
                     str(cell["gpu"]) or "-", gpus_label(cell),
                     _number(cell["users"], 0), _number(cell["tok_s_per_user"], 1),
                     _number(cell["tok_s_per_gpu"], 1), _number(cell["ttft_p99_ms"], 0),
                     *([_or_why(cell["usd_per_m_tokens"], cell["no_usd"], 3)] if priced else []),
                     _or_why(cell["kwh_per_m_tokens"], cell["no_kwh"], 3), str(cell["runs"]),
                     _left_out_note(cell)])
    return markdown_table(header, body)


def _or_why(value: float, why: str, digits: int) -> str:
    return _number(value, digits) if pd.notna(value) else f"- ({why})"


def _left_out_note(cell: pd.Series) -> str:
    if not cell["left_out_runs"]:
        return ""
    return f"{cell['left_out_runs']} more run(s) left out: {cell['left_out_why']}"


def left_out_markdown(measured: pd.DataFrame) -> str:
    """Every run not placed, with why."""
    left = measured[measured["left_out"] != ""].sort_values(["engine", "users", "timestamp"])
    shown = shown_options(left["flags"])
    body = [[f"`{run['run_id']}`", config_label(run, shown[run["flags"]]),
             _number(run["users"], 0), str(run["workload"]), run["left_out"]]
            for _, run in left.iterrows()]
    return markdown_table(["run", "configuration", "users", "workload", "why left out"], body)


@dataclass(frozen=True)
class _Judged:
    """One cell against a target: `misses` (bound, worst repeat, share past the limit) or why
    it was not judged (`unjudged`)."""
    cell: pd.Series
    misses: tuple[tuple[Bound, float, float], ...] = ()
    unjudged: str = ""

    @property
    def met(self) -> bool:
        return not self.misses and not self.unjudged


def target_lines(measured: pd.DataFrame, cells: pd.DataFrame, bounds: tuple[Bound, ...],
                 label: str, shown: dict[str, str], every_miss: bool = False
                 ) -> tuple[list[str], pd.Series | None]:
    """What the target picks in one group (`cells` of one GROUP): the met cell with the most
    tok/s per GPU, or none and what each came closest to missing (the closest
    _CLOSEST_SHOWN, or all with `every_miss`); and the picked cell, or None."""
    target = ",".join(map(str, bounds))
    judged = [_judge(cell, measured, bounds) for _, cell in cells.iterrows()]
    met = sorted((j for j in judged if j.met), key=lambda j: -j.cell["tok_s_per_gpu"])
    if met:
        return [f"target {target} in {label}: " + _pick(met, shown)], met[0].cell
    missed = sorted((j for j in judged if j.misses), key=lambda j: max(m[2] for m in j.misses))
    lines = [f"target {target} in {label}: no configuration meets it in every repeat"]
    shown_misses = missed if every_miss else missed[:_CLOSEST_SHOWN]
    lines += [f"  {_name(j.cell, shown)} missed " + ", ".join(
        f"{bound} (worst repeat {value:,.4g}, {share:.0%} past)" for bound, value, share
        in sorted(j.misses, key=lambda m: m[2])) for j in shown_misses]
    if len(missed) > len(shown_misses):
        lines.append(f"  ... {len(missed) - len(shown_misses)} more configuration(s) missed it "
                     "by more (see report.md)")
    unjudged = [j for j in judged if j.unjudged]
    if unjudged:
        lines.append(f"  not judged: " + "; ".join(f"{_name(j.cell, shown)} ({j.unjudged})"
                                                    for j in unjudged))
    return lines, None


def _judge(cell: pd.Series, measured: pd.DataFrame, bounds: tuple[Bound, ...]) -> _Judged:
    if cell["left_out_runs"]:
        return _Judged(cell, unjudged=f"{cell['left_out_runs']} repeat(s) left out: "
                                      f"{cell['left_out_why']}")
    repeats = measured[measured["run_id"].isin(cell["run_ids"].split(";"))]
    misses = []
    for bound in bounds:
        values = pd.to_numeric(repeats.get(bound.metric), errors="coerce")
        if values is None or values.isna().any():
            why = {"usd_per_m_tokens": cell["no_usd"], "kwh_per_m_tokens": cell["no_kwh"]}.get(
                bound.metric, "not recorded")
            return _Judged(cell, unjudged=f"no {bound.metric}: {why}")
        worst = values.max() if bound.upper else values.min()
        if not bound.met(worst):
            misses.append((bound, float(worst), bound.miss(worst)))
    return _Judged(cell, tuple(misses))


def _pick(met: list[_Judged], shown: dict[str, str]) -> str:
    best = met[0].cell
    text = (f"{_name(best, shown)}: {best['tok_s_per_gpu']:,.1f} tok/s per GPU on "
            f"{gpus_label(best)} GPU(s), {best['tok_s_per_user']:,.1f} tok/s per user, TTFT p99 "
            f"{best['ttft_p99_ms']:,.0f} ms, met in all {best['runs']} repeat(s)")
    if pd.notna(best["usd_per_m_tokens"]):
        text += f", ${best['usd_per_m_tokens']:,.3f} per million output tokens"
    if len(met) == 1:
        return text + " (the only configuration that meets it)"
    second = met[1].cell
    against = f"{_name(second, shown)} ({second['tok_s_per_gpu']:,.1f} tok/s per GPU)"
    if best["runs"] < 2 or second["runs"] < 2:
        return text + f"; next {against} (single run: no spread to judge the lead by)"
    spread = best["tok_s_per_gpu_sd"] + second["tok_s_per_gpu_sd"]
    if best["tok_s_per_gpu"] - second["tok_s_per_gpu"] <= spread:
        return text + f"; not clearly ahead of {against}: within their repeats' spread"
    return text + f"; {best['tok_s_per_gpu'] / second['tok_s_per_gpu']:.2f}x {against}"


def _name(cell: pd.Series, shown: dict[str, str]) -> str:
    return f"{config_label(cell, shown.get(cell['flags']))} at {cell['users']:g} users"


def _float(value: object) -> float:
    return float(pd.to_numeric(pd.Series([value]), errors="coerce").iloc[0])
