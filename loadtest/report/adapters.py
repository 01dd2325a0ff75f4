"""The report's section on LoRA adapter mixes (--lora-adapters): per run, one line per adapter
(requests, failures, output tok/s, TTFT p50/p99), read from the run's run.json
(loadtest/workload/lora.py's figures), so a reader sees whether some adapters were served worse."""

from __future__ import annotations

import json
from typing import Any, Protocol

import pandas as pd

from loadtest.report.runset import run_files
from loadtest.report.tables import markdown_table

__all__ = ["adapters_markdown", "adapters_section"]


class _Report(Protocol):
    def heading(self, level: int, text: str) -> None: ...
    def text(self, text: str) -> None: ...
    def table(self, markdown: str) -> None: ...


def adapters_section(report: _Report, runs: pd.DataFrame) -> None:
    if "lora_adapters" not in runs or not runs["lora_adapters"].notna().any():
        return
    report.heading(2, "LoRA adapters: figures per adapter")
    report.text("Each run spread its requests over LoRA adapters by model name (--lora-adapters, "
                "--lora-mix). Per adapter: its requests, failures, output tok/s over the run's "
                "completion time (the adapters' rates add up to the run's), and TTFT from the "
                "actual send.")
    for _, run in runs[runs["lora_adapters"].notna()].iterrows():
        figures = _adapters(run)
        title = (f"`{run['run_id']}`: {run['engine']}, {int(run['lora_adapters'])} adapters "
                 f"({run.get('lora_mix', '')})")
        if not figures:
            report.text(f"{title}: no run.json with per-adapter figures found.")
            continue
        report.text(title)
        report.table(adapters_markdown(figures))


def adapters_markdown(figures: dict[str, dict[str, Any]]) -> str:
    def num(value: Any, digits: int) -> str:
        return "-" if value is None else f"{value:,.{digits}f}"

    body = [[name, str(f["requests"]), str(f["failed"]), num(f["output_tok_per_s"], 1),
             num(f["ttft_p50_ms"], 1), num(f["ttft_p99_ms"], 1)]
            for name, f in sorted(figures.items(), key=lambda item: -item[1]["requests"])]
    return markdown_table(["adapter", "requests", "failed", "output tok/s", "TTFT p50 (ms)",
                           "TTFT p99 (ms)"], body)


def _adapters(run: pd.Series) -> dict[str, dict[str, Any]]:
    folder = run_files(run)
    if folder is None or not (folder / "run.json").exists():
        return {}
    try:
        return json.loads((folder / "run.json").read_text(encoding="utf-8")).get("adapters") or {}
    except (OSError, ValueError):
        return {}
