"""The report's sections on what a request asked beyond text: reasoning streams (the first
answer token after the reasoning, the two counted apart: loadtest/results/reasoning.py) and
constrained answers (how many were valid, why the others were not, and what the constraint cost
beside the same prompts sent unconstrained: loadtest/workload/answers.py). Each section is there
only when some run had such requests."""

from __future__ import annotations

from typing import Any, Protocol

import pandas as pd

from loadtest.report.options import options_cell, shown_options
from loadtest.report.tables import markdown_table

__all__ = ["answers_section", "constraint_cost", "reasoning_section"]


class _Report(Protocol):
    tables: list[str]

    def heading(self, level: int, text: str) -> None: ...
    def text(self, text: str) -> None: ...
    def table(self, markdown: str) -> None: ...


def reasoning_section(report: _Report, runs: pd.DataFrame) -> None:
    """One line per run that reasoned: TTFT (any token) beside TTFA (the first answer token)."""
    if "reasoning_requests" not in runs or not (runs["reasoning_requests"].fillna(0) > 0).any():
        return
    reasoned = runs[runs["reasoning_requests"].fillna(0) > 0]
    header = ["engine", "workload", "users", "reasoned", "no answer", "TTFT p50", "TTFA p50",
              "TTFA p99", "switch p50", "reasoning chunks", "answer chunks", "reasoning tokens",
              "answer tokens"]
    body = [[str(r["engine"]), str(r["workload"]), f"{r['users']:g}",
             f"{r['reasoning_requests']:g}/{r['completed']:g}", _count(r.get("reasoning_unanswered")),
             _ms(r.get("ttft_p50_ms")), _ms(r.get("ttfa_p50_ms")), _ms(r.get("ttfa_p99_ms")),
             _ms(r.get("switch_p50_ms")), _count(r.get("reasoning_chunks")),
             _count(r.get("answer_chunks")), _tokens(r, "reasoning_tokens"),
             _tokens(r, "answer_tokens")] for _, r in reasoned.iterrows()]
    table = markdown_table(header, body)
    report.heading(2, "Reasoning: the first answer token")
    report.text("TTFT is the first token of any kind; TTFA the first token of the answer, what a "
                "user waits for (ms); the switch, from the last reasoning chunk to the first "
                "answer chunk. Tokens as the engine counted them, `-` where it did not: its "
                "chunks are no count (the reasoning markers stream none).")
    report.table(table)
    report.tables.append("Reasoning: the first answer token\n" + table)


def answers_section(report: _Report, runs: pd.DataFrame) -> None:
    """One line per structured run: answers valid, failures by reason, its speed; then each
    constrained run beside the unconstrained run of the same tasks, engine and users."""
    if "constraints_sha256" not in runs:
        return
    structured = runs[runs["constraints_sha256"].fillna("").astype(str) != ""]  # read as "": none
    if structured.empty:
        return
    graded = "answers_graded" in structured and structured["answers_graded"].notna().any()
    header = ["engine", "workload", "users", "constrained", "valid", "failures",
              *(["correct", "wrong tasks"] if graded else []), "tok/s", "TTFT p50", "ITL p50",
              "e2e p50"]
    body = [[str(r["engine"]), str(r["workload"]), f"{r['users']:g}", _yes(r.get("constrained")),
             _valid(r), str(r.get("answer_failures") or "") or "-",
             *([_share(r, "answers_correct", "answers_graded", "answers_correct_pct", 1),
                str(r.get("answers_wrong") or "") or "-"] if graded else []),
             _number(r.get("output_tok_per_s"), 1), _ms(r.get("ttft_p50_ms")),
             _ms(r.get("itl_p50_ms")), _ms(r.get("e2e_p50_ms"))]
            for _, r in structured.iterrows()]
    table = markdown_table(header, body)
    report.heading(2, "Structured output and tool calls: answers checked")
    report.text("Each constrained answer checked: it parses, fits its JSON schema or regex, or "
                "names a declared tool with arguments that fit its parameters; failures by "
                "reason (`cut`: stopped at max_tokens before it was valid). "
                + ("Each graded answer is its task's one right answer or not (answers.py), and "
                   "the tasks answered wrong are named. " if graded else "") + "Latencies in ms.")
    report.table(table)
    cost = constraint_cost(structured)
    if not cost.empty:
        report.text("The constraint's cost: each constrained run beside the unconstrained run "
                    "of the same tasks on the same engine at the same users (medians over "
                    "repeats; tok/s over output tokens, which differ: a constrained answer ends "
                    "when it is complete).")
        report.table(_cost_markdown(cost))
    report.tables.append("Structured output and tool calls\n" + table)


def constraint_cost(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (engine, flags, constraints, users): constrained over unconstrained medians."""
    if "constrained" not in runs:
        return pd.DataFrame()
    flag = runs["constrained"].astype(str).str.lower() == "true"
    keys = ["engine", "flags", "constraints_sha256", "users"]
    frame = runs.assign(_on=flag, flags=runs.get("flags", pd.Series("", index=runs.index)).fillna(""))
    rows: list[dict[str, Any]] = []
    for key, group in frame.groupby(keys, dropna=False):
        on, off = group[group["_on"]], group[~group["_on"]]
        if on.empty or off.empty:
            continue
        row = dict(zip(keys, key))
        row["constraints"] = str(on["constraints"].iloc[0])
        for metric in ("output_tok_per_s", "ttft_p50_ms", "itl_p50_ms", "e2e_p50_ms"):
            base = off[metric].median()
            row[metric] = on[metric].median() / base if base else None
        rows.append(row)
    return pd.DataFrame(rows)


def _cost_markdown(cost: pd.DataFrame) -> str:
    header = ["engine", "constraints", "users", "tok/s", "TTFT p50", "ITL p50", "e2e p50"]
    shown = shown_options(cost["flags"])
    body = [[str(r["engine"]) + (f" {options_cell(shown[r['flags']])}" if r["flags"] else ""), str(r["constraints"]),
             f"{r['users']:g}", *(_ratio(r[m]) for m in ("output_tok_per_s", "ttft_p50_ms",
                                                         "itl_p50_ms", "e2e_p50_ms"))]
            for _, r in cost.iterrows()]
    return markdown_table(header, body)


def _valid(row: pd.Series) -> str:
    return _share(row, "answers_valid", "answers_checked", "answers_valid_pct")


def _share(row: pd.Series, part: str, whole: str, pct: str, digits: int = 0) -> str:
    """`part/whole (pct%)`, or - where the run has no such count."""
    total = row.get(whole)
    if total is None or pd.isna(total):
        return "-"
    return f"{row[part]:g}/{total:g} ({row[pct]:.{digits}f}%)"


def _tokens(row: pd.Series, column: str) -> str:
    value = row.get(column)
    if value is None or pd.isna(value):
        return "-"
    return f"{value:,.0f} ({row.get('reasoning_tokens_source')})"


def _yes(value: Any) -> str:
    return "yes" if str(value).lower() == "true" else "no"


def _ratio(value: Any) -> str:
    return "-" if value is None or pd.isna(value) else f"{value:.2f}x"


def _ms(value: Any) -> str:
    return _number(value, 1)


def _count(value: Any) -> str:
    return _number(value, 0)


def _number(value: Any, digits: int) -> str:
    if value is None or pd.isna(value):
        return "-"
    return f"{value:,.{digits}f}"
