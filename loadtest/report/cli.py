"""python -m loadtest.report [RESULTS] [--out DIR]: the report engineers read, from results files.

    python -m loadtest.report results/                      # -> results/report/
    python -m loadtest.report results/sweep --out /tmp/r --baseline=--max-num-seqs=256
    python -m loadtest.report results/ --where engine=vllm --where tag=nightly
    python -m loadtest.report results/ --race --where tag=demo --failed "transformers=why"
    python -m loadtest.report export/results.duckdb          # an export (rig export) -> export/report/
    python -m loadtest.report results/ --frontier --target "ttft_p99_ms<=2000,tok_s_per_user>=30"
    python -m loadtest.report results/ --gpu-hour-price 2.50  # dollars per million tokens

Reads every runs.csv under RESULTS and each run's requests.jsonl / telemetry.jsonl, or an export
of them (`rig export`: its folder of Parquet files, or its DuckDB file), which gives the same
report; never runs anything. Prints each heat's table to stdout and writes report.md,
report.html (images embedded, one file to send) and the PNGs beside them.
What the report holds, section by section: loadtest/report/build.py. Options are checked before
pandas and matplotlib load (about a second), so --help and bad input answer at once.
Exit codes: 0 report written (or nothing to report, said in one line), 2 bad folder or option.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from loadtest.toolkit.args import RigParser, command_prog
from loadtest.toolkit.types import percent, positive_number, writable_folder
from loadtest.report.cost import GpuPrices, gpu_prices_file
from loadtest.report.target import parse_target
from loadtest.results.goodput import DEFAULT_SLO_SHARE_PCT

__all__ = ["main", "parser"]


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    root = Path(args.results)
    if not root.is_dir() and not (root.is_file() and root.suffix == ".duckdb"):
        print(f"error: no results folder {root} (pass the --out folder of a run or sweep, or "
              "an export)", file=sys.stderr)
        return 2
    try:
        failed = _failed_engines(args.failed)
        prices = _prices(args)
    except ValueError as exc:
        print(f"error: {exc}".replace("\r", "\\r").replace("\n", "\\n"), file=sys.stderr)
        return 2
    # pandas and matplotlib (about a second) once the options are good, not for --help or an error
    from loadtest.export.store import is_export
    from loadtest.report.build import report_folder

    out = Path(args.out) if args.out else (root if root.is_dir() else root.parent) / "report"
    options = dict(where=args.where, failed=failed, baseline=args.baseline, race=args.race,
                   slo_share=args.slo_share, frontier=args.frontier, prices=prices,
                   target=args.target or ())
    if not is_export(root):
        return report_folder(root, out, **options)
    return _report_export(root, out, options)


def _report_export(path: Path, out: Path, options: dict[str, Any]) -> int:
    """The report of an export: its tables laid out again as the results folders they came
    from (in a temporary folder), reported as those are."""
    from loadtest.export.cli import one_line
    from loadtest.export.store import read_export, write_results_folder
    from loadtest.export.tables import ExportError
    from loadtest.report.build import report_folder

    try:
        tables = read_export(path)
    except ExportError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="rig-report-") as folder:
        write_results_folder(tables, Path(folder))
        return report_folder(Path(folder), out, source=path, **options)


def parser() -> RigParser:
    p = RigParser(prog=command_prog("python -m loadtest.report"),
                  description="Tables and plots from llm-load-rig results.",
                  epilog="example:\n  rig report results/ --where engine=vllm-cpu|llamacpp-cpu")
    p.add_argument("results", nargs="?", default="results",
                   help="results folder: every runs.csv below it is read (default results/); "
                   "or an export: its folder or its .duckdb file (rig export)")
    p.add_argument("--out", type=writable_folder,
                   help="where to write the report (default RESULTS/report/; beside a .duckdb "
                   "file for one)")
    p.add_argument("--baseline", default=None, metavar="FLAGS",
                   help="flags of the baseline for flag effects, as --baseline=FLAGS "
                   "(default: the flags of the first run)")
    p.add_argument("--where", action="append", default=[], metavar="COLUMN=VALUE",
                   help="keep only runs whose runs.csv COLUMN equals VALUE, or one of "
                   "A|B|... (repeatable)")
    p.add_argument("--race", action="store_true",
                   help="open with the race even for one engine, and print only the race")
    p.add_argument("--failed", action="append", default=[], metavar="ENGINE=REASON",
                   help="an engine that was asked for but did not run, shown in the race "
                   "(repeatable)")
    p.add_argument("--slo-share", type=percent, default=str(DEFAULT_SLO_SHARE_PCT), metavar="PCT",
                   help="percent of requests that must meet the runs' --slo targets for a "
                   "rate to count as within them (default 99)")
    p.add_argument("--frontier", action="store_true",
                   help="print only the frontier by GPU (output tok/s per GPU against tok/s per "
                   "user) and the runs left out of it")
    p.add_argument("--target", type=parse_target, metavar="BOUNDS",
                   help="name the configuration with the most tok/s per GPU that meets every "
                   "bound in every repeat, e.g. \"ttft_p99_ms<=2000,tok_s_per_user>=30\" "
                   "(metrics: runs.csv numbers, tok_s_per_user, tok_s_per_gpu, "
                   "usd_per_m_tokens, kwh_per_m_tokens)")
    prices = p.add_mutually_exclusive_group()
    prices.add_argument("--gpu-hour-price", type=positive_number, metavar="USD",
                        help="dollars per GPU-hour, for every GPU: cost per million output "
                        "tokens in the tables (the rig ships no prices)")
    prices.add_argument("--gpu-prices", type=gpu_prices_file, metavar="FILE",
                        help="dollars per GPU-hour by GPU name: YAML (`NVIDIA H200: 3.80`) or "
                        "CSV (gpu,usd_per_hour); a name matches the GPUs whose NVML name holds it")
    return p


def _prices(args: Any) -> GpuPrices | None:
    """The GPU-hour prices given, if any; ValueError for a target on dollars without one."""
    prices = (GpuPrices(flat=args.gpu_hour_price, source="--gpu-hour-price")
              if args.gpu_hour_price is not None else args.gpu_prices)
    if prices is None and any(b.metric == "usd_per_m_tokens" for b in args.target or ()):
        raise ValueError("--target usd_per_m_tokens needs a price: give --gpu-hour-price or "
                         "--gpu-prices")
    return prices


def _failed_engines(pairs: list[str]) -> dict[str, str]:
    failed = {}
    for pair in pairs:
        engine, sep, why = pair.partition("=")
        if not sep or not engine:
            raise ValueError(f"--failed {pair}: write ENGINE=REASON")
        failed[engine] = why.splitlines()[0] if why else "no reason given"
    return failed
