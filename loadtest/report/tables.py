"""The tables a report shows, computed from runs.csv rows only.

- cell table: one row per cell (engine, flags, gpu, users) of one workload (a heat's table; for
  several workloads, `heat_cells`) with the mean over its repeats and,
  for throughput and completion time, the spread (sample standard deviation, ddof=1; none with
  one repeat). Latency percentiles are the mean of each repeat's own percentile (each computed
  from that run's raw requests), failures are summed, client CPU is the highest peak.
- flag effects: cells that share everything but `flags`, each set of flags against a baseline.
  A difference is called only when it is larger than both cells' spreads added together, so
  a single repeat or noisy repeats read "not significant" rather than a ranking.
- engine shared: where engine telemetry shows the engine holding more requests at once
  (running + waiting) than the run's users could send, another client was using it, and the
  cell says so: its numbers measure a shared engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from loadtest.report.options import options_cell, shown_options
from loadtest.report.runset import CELL
from loadtest.results.rules import CLIENT_CPU_LIMIT_PCT

__all__ = [
    "SATURATED_CPU_PCT",
    "cell_table",
    "comparison_markdown",
    "flag_effects",
    "flag_effects_markdown",
    "heat_cells",
    "markdown_table",
]

SATURATED_CPU_PCT = CLIENT_CPU_LIMIT_PCT  # the client_cpu_high warning's own limit
_UNSTABLE_SD_PCT = 10.0  # pyperf's rule: a stdev of 10% of the mean or more is unstable
_SPREAD = {"output_tok_per_s": "tok_s", "completion_time_s": "time_s"}
_MEAN = {"avg_output_tokens": "output_tokens", "ttft_p50_ms": "ttft_p50_ms",
         "ttft_p99_ms": "ttft_p99_ms", "itl_p50_ms": "itl_p50_ms", "itl_p99_ms": "itl_p99_ms",
         "e2e_p99_ms": "e2e_p99_ms", "gpu_mem_peak_mib": "gpu_mem_peak_mib",
         "gpu_util_mean_pct": "gpu_util_mean_pct", "gpu_j_per_output_token": "gpu_j_per_token",
         "engine_kv_cache_peak_pct": "kv_cache_peak_pct", "engine_waiting_peak": "waiting_peak"}


def cell_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per cell of `runs` (one comparison group), sorted by configuration then users."""
    groups = runs.groupby(CELL, sort=True, dropna=False)
    rows = [_cell_row(key, repeats) for key, repeats in groups]
    return pd.DataFrame(rows).reset_index(drop=True)


def heat_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """The cell tables of each workload in `runs` stacked, with `workload_sha256` and `workload`:
    one row per cell of each heat, so repeats of different workloads are never averaged."""
    parts = []
    for sha, same in runs.groupby("workload_sha256", sort=False):
        part = cell_table(same)
        part["workload_sha256"] = sha
        part["workload"] = ", ".join(sorted(set(same["workload"].astype(str))))
        parts.append(part)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _cell_row(key: tuple[Any, ...], repeats: pd.DataFrame) -> dict[str, Any]:
    row: dict[str, Any] = dict(zip(CELL, key))
    row["runs"] = len(repeats)
    for column, name in _SPREAD.items():
        values = pd.to_numeric(repeats[column], errors="coerce")
        row[f"{name}_mean"] = values.mean()
        row[f"{name}_sd"] = values.std(ddof=1) if len(values) > 1 else np.nan
    for column, name in _MEAN.items():
        if column in repeats:
            row[name] = pd.to_numeric(repeats[column], errors="coerce").mean()
    row["requests"] = int(pd.to_numeric(repeats["requests"], errors="coerce").sum())
    row["failed"] = int(pd.to_numeric(repeats["failed"], errors="coerce").fillna(0).sum())
    cpu = pd.to_numeric(repeats.get("client_cpu_max_pct"), errors="coerce")
    row["client_cpu_max_pct"] = cpu.max() if cpu is not None else np.nan
    row["warnings"] = _union(repeats["warnings"])
    verdict = repeats.get("verdict", pd.Series("", index=repeats.index)).astype(str)
    invalid = verdict.str.strip().str.lower() == "invalid"
    row["invalid"] = int(invalid.sum())
    row["invalid_reasons"] = _union(repeats.loc[invalid].get(
        "verdict_reasons", pd.Series(dtype=str)))
    row["engine_load_peak"] = _engine_load_peak(repeats)
    row["unstable"] = bool(row["runs"] > 1 and row["tok_s_sd"] >= _UNSTABLE_SD_PCT / 100
                           * row["tok_s_mean"])
    row["run_ids"] = ";".join(repeats["run_id"])
    return row


def _engine_load_peak(repeats: pd.DataFrame) -> float:
    """The most requests the engine held at once (running + waiting) in any repeat."""
    if "engine_held_peak" in repeats and repeats["engine_held_peak"].notna().any():
        return pd.to_numeric(repeats["engine_held_peak"], errors="coerce").max()
    if "engine_running_peak" not in repeats or "engine_waiting_peak" not in repeats:
        return np.nan
    running = pd.to_numeric(repeats["engine_running_peak"], errors="coerce")
    waiting = pd.to_numeric(repeats["engine_waiting_peak"], errors="coerce").fillna(0)
    return (running + waiting).max()


def _union(cells: pd.Series) -> str:
    names = {name for cell in cells.astype(str) for name in cell.split(";") if name}
    return ";".join(sorted(names))


def flag_effects(runs: pd.DataFrame, baseline: str | None = None) -> pd.DataFrame:
    """Each flags cell against the baseline flags of the same engine, gpu and users.

    The baseline is `baseline` when given, else the flags of the earliest run of that set.
    Sets with a single flags value are left out: there is nothing to compare.
    """
    rows = []
    cells = cell_table(runs)
    for (engine, gpu, users), same in cells.groupby(["engine", "gpu", "users"], dropna=False):
        if same["flags"].nunique() < 2:
            continue
        base_flags = baseline if baseline is not None else _first_flags(runs, engine, gpu, users)
        base = same[same["flags"] == base_flags]
        if base.empty:
            continue
        for _, cell in same[same["flags"] != base_flags].iterrows():
            rows.append(_effect(cell, base.iloc[0]))
    return pd.DataFrame(rows)


def _first_flags(runs: pd.DataFrame, engine: str, gpu: str, users: Any) -> str:
    same = runs[_is(runs["engine"], engine) & _is(runs["gpu"], gpu) & _is(runs["users"], users)]
    return str(same.sort_values("timestamp").iloc[0]["flags"])


def _is(column: pd.Series, value: Any) -> pd.Series:
    """``column == value``, where a missing value (a column no row wrote) matches missing ones,
    as groupby(dropna=False) groups them."""
    return column.isna() if pd.isna(value) else column == value


def _effect(cell: pd.Series, base: pd.Series) -> dict[str, Any]:
    return {
        "engine": cell["engine"], "gpu": cell["gpu"], "users": cell["users"],
        "flags": cell["flags"], "baseline": base["flags"],
        "runs": f"{cell['runs']} vs {base['runs']}",
        "tok_s": cell["tok_s_mean"], "base_tok_s": base["tok_s_mean"],
        "tok_s_ratio": cell["tok_s_mean"] / base["tok_s_mean"],
        "time_s_ratio": cell["time_s_mean"] / base["time_s_mean"],
        "ttft_p99_ratio": cell["ttft_p99_ms"] / base["ttft_p99_ms"],
        "itl_p99_ratio": cell["itl_p99_ms"] / base["itl_p99_ms"],
        "verdict": _verdict(cell, base),
    }


def _verdict(cell: pd.Series, base: pd.Series) -> str:
    """Faster, slower or not significant; never judged where a side has a run the rig marked
    invalid (its numbers describe the measurer or the host as much as the options)."""
    invalid = [f"{side} {c['invalid']} of {c['runs']} runs invalid "
               f"({c['invalid_reasons'].replace(';', ', ')})"
               for side, c in (("options", cell), ("baseline", base)) if c.get("invalid", 0)]
    if invalid:
        return "not judged: " + "; ".join(invalid)
    if cell["runs"] < 2 or base["runs"] < 2:
        return "not significant (one repeat: no spread)"
    difference = cell["tok_s_mean"] - base["tok_s_mean"]
    if abs(difference) <= cell["tok_s_sd"] + base["tok_s_sd"]:
        return "not significant (within repeat spread)"
    ratio = cell["tok_s_mean"] / base["tok_s_mean"]
    return f"{ratio:.2f}x faster" if ratio > 1 else f"{1 / ratio:.2f}x slower"


def comparison_markdown(cells: pd.DataFrame) -> str:
    """The comparison table: platform, options, gpu -> tok/s, time, tokens, latency, failures."""
    shown = shown_options(cells["flags"]) if "flags" in cells else {}
    columns: list[tuple[str, Callable[[pd.Series], str]]] = [
        ("platform", lambda r: str(r["engine"])),
        ("options", lambda r: options_cell(shown[r["flags"]])),
        ("gpu", lambda r: str(r["gpu"]) or "-"),
        ("users", lambda r: _number(r["users"], 0)),
        ("runs", lambda r: str(r["runs"])),
        ("avg tok/s", lambda r: _spread(r["tok_s_mean"], r["tok_s_sd"], 1)),
        ("avg time (s)", lambda r: _spread(r["time_s_mean"], r["time_s_sd"], 2)),
        ("avg output tokens", lambda r: _number(r["output_tokens"], 1)),
        ("TTFT p50 (ms)", lambda r: _number(r["ttft_p50_ms"], 1)),
        ("TTFT p99 (ms)", lambda r: _number(r["ttft_p99_ms"], 1)),
        ("ITL p50 (ms)", lambda r: _number(r["itl_p50_ms"], 2)),
        ("ITL p99 (ms)", lambda r: _number(r["itl_p99_ms"], 2)),
        ("failed", lambda r: f"{r['failed']}/{r['requests']}"),
        ("client CPU peak %", _client_cpu),
    ]
    for name, column, digits in (("GPU mem peak (MiB)", "gpu_mem_peak_mib", 0),
                                 ("GPU util %", "gpu_util_mean_pct", 1),
                                 ("J/token", "gpu_j_per_token", 3),
                                 ("KV cache peak %", "kv_cache_peak_pct", 1),
                                 ("waiting peak", "waiting_peak", 0)):
        if column in cells and cells[column].notna().any():
            columns.append((name, lambda r, c=column, d=digits: _number(r[c], d)))
    columns.append(("notes", _notes))
    header = [name for name, _ in columns]
    body = [[render(row) for _, render in columns] for _, row in cells.iterrows()]
    return markdown_table(header, body)


def flag_effects_markdown(effects: pd.DataFrame) -> str:
    shown = shown_options([*effects["flags"], *effects["baseline"]]) if not effects.empty else {}
    header = ["platform", "gpu", "users", "options", "baseline", "runs", "tok/s", "tok/s vs base",
              "time vs base", "TTFT p99 vs base", "ITL p99 vs base", "verdict"]
    body = [[str(e["engine"]), str(e["gpu"]) or "-", _number(e["users"], 0), options_cell(shown[e["flags"]]),
             options_cell(shown[e["baseline"]]), e["runs"],
             _number(e["tok_s"], 1), _ratio(e["tok_s_ratio"]), _ratio(e["time_s_ratio"]),
             _ratio(e["ttft_p99_ratio"]), _ratio(e["itl_p99_ratio"]), e["verdict"]]
            for _, e in effects.iterrows()]
    return markdown_table(header, body)


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body]
    return "\n".join(lines)


def _client_cpu(row: pd.Series) -> str:
    text = _number(row["client_cpu_max_pct"], 0)
    return f"**{text} saturated**" if row["client_cpu_max_pct"] > SATURATED_CPU_PCT else text


def _notes(row: pd.Series) -> str:
    notes = [name for name in str(row["warnings"]).split(";") if name]
    if row.get("invalid"):
        reasons = str(row["invalid_reasons"]).replace(";", ", ")
        notes.insert(0, f"**{row['invalid']} of {row['runs']} runs invalid**"
                        + (f" ({reasons})" if reasons else ""))
    if row["unstable"]:
        notes.insert(0, "unstable: repeats differ by 10% or more")
    # one request in flight per user; one more allows for a request the engine has not yet
    # let go of when its user sends the next
    if row["engine_load_peak"] > row["users"] + 1:
        notes.insert(0, f"**engine shared**: it held {row['engine_load_peak']:.0f} requests at "
                        f"once, this run sends at most {row['users']:.0f}")
    return ", ".join(notes)


def _number(value: Any, digits: int) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def _spread(mean: float, sd: float, digits: int) -> str:
    text = _number(mean, digits)
    return text if np.isnan(sd) else f"{text} ± {_number(sd, digits)}"


def _ratio(value: float) -> str:
    return "-" if np.isnan(value) else f"{value:.2f}x"
