"""The report's sections on a run's groups of requests, read from its run.json
(loadtest/results/groups.py's figures): per LoRA adapter (--lora-adapters), and main agents
beside sub-agents (--workload agentic), so a reader sees whether one group was served worse."""

from __future__ import annotations

import json
from typing import Any, Protocol

import pandas as pd

from loadtest.report.runset import run_files
from loadtest.report.tables import markdown_table

__all__ = ["groups_markdown", "groups_section"]

# (run.json section, the runs that have one, heading, what the table shows)
_SECTIONS = (
    ("adapters", lambda runs: runs["lora_adapters"].notna() if "lora_adapters" in runs else None,
     "LoRA adapters: figures per adapter",
     "Each run spread its requests over LoRA adapters by model name (--lora-adapters, "
     "--lora-mix)."),
    ("agents", lambda runs: runs["workload_source"] == "agentic"
     if "workload_source" in runs else None,
     "Agentic traces: main agents and sub-agents",
     "Each run replayed agent sessions on their recorded schedule (--workload agentic); "
     "TTFT from the schedule is what the agent waited."),
)


class _Report(Protocol):
    def heading(self, level: int, text: str) -> None: ...
    def text(self, text: str) -> None: ...
    def table(self, markdown: str) -> None: ...


def groups_section(report: _Report, runs: pd.DataFrame) -> None:
    for key, chosen, heading, about in _SECTIONS:
        mask = chosen(runs)
        if mask is None or not mask.any():
            continue
        report.heading(2, heading)
        report.text(about + " Per group: its requests, failures, output tok/s over the run's "
                    "completion time (the groups' rates add up to the run's), TTFT from the "
                    "actual send and, in open loop, from the schedule.")
        for _, run in runs[mask].iterrows():
            figures = _figures(run, key)
            title = f"`{run['run_id']}`: {run['engine']}, {run['workload']}"
            if not figures:
                report.text(f"{title}: no run.json with these figures found.")
                continue
            report.text(title)
            report.table(groups_markdown(figures, key.rstrip("s")))


def groups_markdown(figures: dict[str, dict[str, Any]], name: str = "adapter") -> str:
    def num(value: Any, digits: int = 1) -> str:
        return "-" if value is None else f"{value:,.{digits}f}"

    scheduled = any("ttft_sched_p99_ms" in f for f in figures.values())
    header = [name, "requests", "failed", "output tok/s", "TTFT p50 (ms)", "TTFT p99 (ms)"]
    header += ["TTFT p99 from schedule (ms)"] if scheduled else []
    body = []
    for group, f in sorted(figures.items(), key=lambda item: -item[1]["requests"]):
        line = [group, str(f["requests"]), str(f["failed"]), num(f["output_tok_per_s"]),
                num(f["ttft_p50_ms"]), num(f["ttft_p99_ms"])]
        body.append(line + ([num(f.get("ttft_sched_p99_ms"))] if scheduled else []))
    return markdown_table(header, body)


def _figures(run: pd.Series, key: str) -> dict[str, dict[str, Any]]:
    folder = run_files(run)
    if folder is None or not (folder / "run.json").exists():
        return {}
    try:
        return json.loads((folder / "run.json").read_text(encoding="utf-8")).get(key) or {}
    except (OSError, ValueError):
        return {}
