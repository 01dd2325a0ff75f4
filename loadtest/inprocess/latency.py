"""The latency table of comparison studies, over servers and in-process engines alike.

    python -m loadtest.inprocess.latency DIR [--tag latency] [--md FILE] [--png FILE]

One row per platform and options (engine, mode, flags, gpu) over the runs.csv rows under DIR
with that tag (`rig latency` writes them): the studies' columns, computed from every
completed request's record (requests.jsonl), never from run averages:

- options: the run's flags (a server's cores, an in-process variant), and the users (batch)
  where more than one;
- avg tok/s: the mean over requests of output tokens / end-to-end seconds (one user, so each
  request's own decoding speed, prefill included);
- avg time (s): the mean end-to-end time of a request (sent -> last token);
- avg output tokens: the mean output tokens per request, as the engine counted them;
- the distribution of per-request tok/s (p10 / p50 / p90, min-max), TTFT mean where the engine
  streams, and how many requests and runs (valid runs) stand behind each row.

Server rows time a request from the client (HTTP, the server's front end and the engine);
in-process rows from inside the engine's process: the difference is the server's overhead
(python -m loadtest.inprocess.overhead measures it pairwise).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from loadtest.toolkit.args import RigParser, command_prog
from loadtest.toolkit.types import output_file
from loadtest.report.runset import load_runs, read_requests, run_files

__all__ = ["latency_rows", "latency_markdown", "main", "parser"]

KEY = ["engine", "mode", "flags", "gpu", "users", "workload_sha256"]


def latency_rows(runs: pd.DataFrame) -> list[dict[str, Any]]:
    """One dict per platform and options, fastest (avg tok/s) first."""
    runs = runs.copy()
    runs["mode"] = runs["mode"].replace("", "server") if "mode" in runs else "server"
    rows = []
    for key, group in runs.groupby(KEY, sort=False, dropna=False):
        frames = []
        for _, run in group.iterrows():
            folder = run_files(run)
            if folder is not None:
                frames.append(read_requests(folder))
        requests = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        if not requests.empty:
            requests = requests[requests["error_kind"].isna() & requests["e2e_ms"].notna()]
        if requests.empty:
            continue
        seconds = requests["e2e_ms"].astype(float) / 1000
        tokens = requests["output_tokens"].astype(float)
        tok_s = (tokens / seconds).to_numpy()
        p10, p50, p90 = np.percentile(tok_s, [10, 50, 90])
        ttft = requests["ttft_ms"].dropna().astype(float) if "ttft_ms" in requests else pd.Series()
        verdicts = group["verdict"].astype(str) if "verdict" in group else pd.Series(dtype=str)
        reasons = sorted({r for text in group.get("verdict_reasons", pd.Series(dtype=str)).astype(str)
                          for r in text.split(";") if r})
        row = dict(zip(KEY, key))
        row.update({
            "avg_tok_s": float(tok_s.mean()), "avg_time_s": float(seconds.mean()),
            "avg_output_tokens": float(tokens.mean()), "tok_s_p10": float(p10),
            "tok_s_p50": float(p50), "tok_s_p90": float(p90), "tok_s_min": float(tok_s.min()),
            "tok_s_max": float(tok_s.max()), "ttft_mean_ms": float(ttft.mean()) if len(ttft) else None,
            "requests": int(len(requests)), "runs": int(len(group)),
            "valid_runs": int((verdicts == "valid").sum()), "reasons": reasons,
            "tok_s_values": tok_s, "workloads": sorted(set(group["workload"].astype(str))),
        })
        rows.append(row)
    return sorted(rows, key=lambda r: -r["avg_tok_s"])


def latency_markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| platform | mode | options | gpu | avg tok/s | avg time (s) | avg output tokens | "
             "per-request tok/s p10 / p50 / p90 (min-max) | TTFT mean (ms) | requests (runs, valid) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ttft = "-" if r["ttft_mean_ms"] is None else f"{r['ttft_mean_ms']:,.1f}"
        valid = f"{r['valid_runs']} valid" + (f"; {', '.join(r['reasons'])}" if r["reasons"] else "")
        options = " ".join(filter(None, [str(r["flags"]), f"{r['users']} users" if r["users"] != 1 else ""]))
        lines.append(
            f"| {r['engine']} | {r['mode']} | {options or '-'} | {r['gpu'] or 'none (CPU)'} | "
            f"{r['avg_tok_s']:,.1f} | {r['avg_time_s']:.3f} | {r['avg_output_tokens']:.1f} | "
            f"{r['tok_s_p10']:,.1f} / {r['tok_s_p50']:,.1f} / {r['tok_s_p90']:,.1f} "
            f"({r['tok_s_min']:,.1f}-{r['tok_s_max']:,.1f}) | {ttft} | "
            f"{r['requests']} ({r['runs']}, {valid}) |")
    return "\n".join(lines) + "\n"


def latency_plot(rows: list[dict[str, Any]], path: Path) -> None:
    """The per-request tok/s distribution of each row, as box plots on a log axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 0.55 * len(rows) + 1.5))
    labels = [f"{r['engine']} {r['flags']} ({r['mode']})".replace("  ", " ") for r in rows]
    ax.boxplot([r["tok_s_values"] for r in rows][::-1], orientation="horizontal", whis=(0, 100))
    ax.set_yticks(range(1, len(rows) + 1), labels[::-1])
    ax.set_xscale("log")
    ax.set_xlabel("per-request output tok/s (one user; whiskers: min-max)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parser() -> RigParser:
    p = RigParser(prog=command_prog("python -m loadtest.inprocess.latency"),
                  description="The studies' latency table from a results folder.",
                  epilog="example:\n  rig latency-table results/latency --md latency.md")
    p.add_argument("folder", type=Path, help="results folder (rig latency's --out)")
    p.add_argument("--tag", default="latency", help="runs with this tag (default latency)")
    p.add_argument("--md", type=output_file, default=None, help="also write the table here")
    p.add_argument("--png", type=output_file, default=None,
                   help="plot the tok/s distributions here")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.folder.is_dir():
        print(f"error: no results folder {args.folder}", file=sys.stderr)
        return 2
    try:
        runs = load_runs(args.folder)
    except ValueError as exc:  # a runs.csv it cannot read as the rig wrote it
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not runs.empty and args.tag:
        runs = runs[runs["tag"].astype(str) == args.tag]
    if runs.empty:
        print(f"error: no runs tagged {args.tag!r} under {args.folder}", file=sys.stderr)
        return 2
    rows = latency_rows(runs)
    if not rows:
        print(f"error: no completed requests in the runs tagged {args.tag!r}", file=sys.stderr)
        return 2
    table = latency_markdown(rows)
    workloads = sorted({w for r in rows for w in r["workloads"]})
    note = f"workload: {', '.join(workloads)}; one user; warm-up excluded\n"
    print(table + "\n" + note, end="")
    if args.md:
        args.md.write_text(table + "\n" + note)
    if args.png:
        latency_plot(rows, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
