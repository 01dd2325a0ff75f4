"""The sweep's tables, from runs.csv rows only: completion time and output tok/s per user count.

Rules, printed under every table:
- fastest (`*`): the lowest mean completion time, among runs that count (every request
  answered, verdict not invalid); across configurations (comparison_table, one per workload),
  only where at least two configurations have such runs at that user count: one alone is no
  winner; there each mean is of the runs that count (`~` some left out, `!` none counts);
- knee (`<- knee`): the smallest user count whose mean output tok/s is within 5% of the best
  mean, among user counts whose runs all count; adding users past it stops paying (more load, at
  most 5% more throughput);
- a user count with invalid runs says how many and why (the verdict's reasons): its numbers are
  shown, never ranked;
- unstable: the repeats' standard deviation is more than 10% of their mean, for completion time
  or output tok/s (pyperf's rule): run more repeats before trusting that row;
- API server at N%: a run of that user count carried the warning front_end_saturated (its busiest
  API server's share of a core, the highest over the repeats): set beside a configuration with
  more API servers, it may be compared by its front ends, not its GPUs.
"""

from __future__ import annotations

import pandas as pd

from loadtest.results.rules import FRONT_END_CPU_LIMIT_PCT

__all__ = ["KNEE_PCT", "RULES", "UNSTABLE_PCT", "cell_frame", "comparison_table", "config_table"]

KNEE_PCT = 5.0
UNSTABLE_PCT = 10.0
RULES = (f"* fastest: lowest mean completion time of runs with no failed request and a verdict not "
         f"invalid (across configurations: where two configurations have some). <- knee: the smallest user "
         f"count whose mean output tok/s is within {KNEE_PCT:g}% of the best, of user counts whose runs all "
         f"count; past it, adding users stops paying. invalid: shown with the verdict's reasons in the "
         f"configuration's table, never ranked; across configurations a mean is of the runs that count "
         f"(~ some left out; ! none counts: the mean of them all, not ranked), workload by workload. "
         f"unstable: stdev over the repeats > {UNSTABLE_PCT:g}% of the mean (pyperf's rule). "
         f"API server at N%: a run's busiest API server passed {FRONT_END_CPU_LIMIT_PCT:g}% of a core "
         f"(front_end_saturated): its front end, not its GPUs, may set that row. "
         f"spread = min-max over the repeats.")


def cell_frame(rows: list[dict[str, str]], config_of: dict[str, str]) -> pd.DataFrame:
    """runs.csv rows -> one line per run: config, users, repeat, completion_time_s,
    output_tok_per_s, failed, invalid (the verdict column says invalid), reasons (its
    verdict_reasons where invalid), front_end_pct (its busiest API server's share of a core
    where it carried the warning front_end_saturated, else empty).

    ``config_of`` maps each run_id of the sweep to its configuration's folder name."""
    kept = [{"config": config_of[r["run_id"]], "users": int(r["users"]), "repeat": int(r["repeat"]),
             "completion_time_s": _float(r.get("completion_time_s")),
             "output_tok_per_s": _float(r.get("output_tok_per_s")),
             "failed": int(_float(r.get("failed")) or 0),
             "invalid": _invalid(r),
             "reasons": (r.get("verdict_reasons") or "").strip() if _invalid(r) else "",
             "front_end_pct": (_float(r.get("engine_front_end_cpu_max_pct"))
                               if _warned(r, "front_end_saturated") else None)}
            for r in rows if r.get("run_id") in config_of]
    frame = pd.DataFrame(kept, columns=["config", "users", "repeat", "completion_time_s",
                                        "output_tok_per_s", "failed", "invalid", "reasons",
                                        "front_end_pct"])
    return frame.astype({"front_end_pct": float})  # None -> NaN, so max() skips it


def _warned(row: dict[str, str], code: str) -> bool:
    return code in (row.get("warnings") or "").split(";")


def _invalid(row: dict[str, str]) -> bool:
    return (row.get("verdict") or "").strip().lower() == "invalid"


def _stats(runs: pd.DataFrame) -> pd.DataFrame:
    grouped = runs.groupby("users").agg(
        runs=("repeat", "count"), failed=("failed", "sum"), invalid=("invalid", "sum"),
        reasons=("reasons", lambda r: ", ".join(sorted({x for one in r if one for x in one.split(";")}))),
        t_mean=("completion_time_s", "mean"), t_sd=("completion_time_s", "std"),
        t_min=("completion_time_s", "min"), t_max=("completion_time_s", "max"),
        r_mean=("output_tok_per_s", "mean"), r_sd=("output_tok_per_s", "std"),
        r_min=("output_tok_per_s", "min"), r_max=("output_tok_per_s", "max"),
        front_end_pct=("front_end_pct", "max"))
    return grouped.sort_index().fillna({"t_sd": 0.0, "r_sd": 0.0})


def config_table(runs: pd.DataFrame) -> str:
    """One configuration's runs as a text table, fastest and knee marked."""
    stats = _stats(runs)
    if stats.empty:
        return "(no measured runs)"
    counted = stats[(stats["failed"] == 0) & (stats["invalid"] == 0)]
    fastest = counted["t_mean"].idxmin() if len(counted) else None
    knee = (counted.index[counted["r_mean"] >= counted["r_mean"].max() * (1 - KNEE_PCT / 100)].min()
            if len(counted) else None)
    header = (f"{'users':>6} {'runs':>4}   {'completion s':>12} {'spread':>15}   "
              f"{'output tok/s':>12} {'spread':>17}   notes")
    lines = [header]
    for users, s in stats.iterrows():
        notes = (["*"] if users == fastest else []) + (["<- knee"] if users == knee else [])
        if _unstable(s["t_sd"], s["t_mean"]) or _unstable(s["r_sd"], s["r_mean"]):
            notes.append("unstable")
        if s["failed"]:
            notes.append(f"{int(s['failed'])} requests failed")
        if s["invalid"]:
            notes.append(f"{int(s['invalid'])} of {int(s['runs'])} invalid: {s['reasons'] or 'no reason given'}")
        if pd.notna(s["front_end_pct"]):
            notes.append(f"API server at {s['front_end_pct']:.0f}%")
        lines.append(f"{users:>6} {int(s['runs']):>4}   {s['t_mean']:>12.2f} "
                     f"{_spread(s['t_min'], s['t_max'], 2):>15}   {s['r_mean']:>12.1f} "
                     f"{_spread(s['r_min'], s['r_max'], 1):>17}   {' '.join(notes)}".rstrip())
    return "\n".join(lines)


def comparison_table(runs: pd.DataFrame) -> str:
    """Mean completion time of every configuration at every user count, of one workload (the
    caller splits several: their times are not comparable). Each mean is of the runs that count
    (no failed request, verdict not invalid): `~` where some runs were left out, `!` where none
    counts (then the mean of them all, never ranked); `*` the fastest per row, only where two
    configurations or more have runs that count."""
    if runs.empty:
        return "(no measured runs)"
    counts = (runs["failed"] == 0) & ~runs["invalid"].astype(bool)
    means = runs.pivot_table(index="users", columns="config", values="completion_time_s",
                             aggfunc="mean", sort=False)
    ranked = runs[counts].pivot_table(index="users", columns="config", values="completion_time_s",
                                      aggfunc="mean", sort=False)
    left_out = set(zip(runs.loc[~counts, "users"], runs.loc[~counts, "config"]))
    configs = list(dict.fromkeys(runs["config"]))
    width = max(12, *(len(c) for c in configs))
    lines = [f"{'users':>6}  " + "  ".join(f"{c:>{width}}" for c in configs)]
    for users, row in means.sort_index().iterrows():
        rank = ranked.loc[users].dropna() if users in ranked.index else pd.Series(dtype=float)
        best = rank.idxmin() if len(rank) >= 2 else None
        cells = []
        for config in configs:
            if pd.isna(row.get(config)):
                cells.append("-")
            elif config not in rank:
                cells.append(f"{row[config]:.2f} s ! ")
            else:
                mark = ("*" if config == best else "") + ("~" if (users, config) in left_out else "")
                cells.append(f"{rank[config]:.2f} s {mark:<2}")
        lines.append(f"{users:>6}  " + "  ".join(f"{c:>{width}}" for c in cells))
    return "\n".join(lines)


def _unstable(sd: float, mean: float) -> bool:
    return bool(mean) and sd / mean > UNSTABLE_PCT / 100


def _spread(low: float, high: float, digits: int) -> str:
    return f"{low:.{digits}f}-{high:.{digits}f}"


def _float(value: str | None) -> float:
    try:
        return float(value) if value not in (None, "") else float("nan")
    except ValueError:
        return float("nan")
