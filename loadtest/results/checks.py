"""The warnings a run carries: the closed list is loadtest/results/rules.py's WARNING_RULES, each
with its cause, limits and remedy.

Warnings are printed to stderr at the end of the run and stored in its row (`warnings`), so a
number is never read without the reason to doubt it.
"""

from __future__ import annotations

from typing import Any

from loadtest.results.rules import ERROR_REMEDIES, WARNING_RULES, WARNINGS

__all__ = ["ERROR_REMEDIES", "WARNINGS", "check_run", "error_remedies"]


def error_remedies(errors: str) -> list[str]:
    """`kind: remedy` for each kind in a row's `errors` column ("kind=count;...")."""
    kinds = [item.split("=")[0] for item in errors.split(";") if item]
    return [f"{kind}: {ERROR_REMEDIES[kind]}" for kind in kinds if kind in ERROR_REMEDIES]


def check_run(row: dict[str, Any]) -> list[str]:
    """The codes of the warnings that apply to `row`, in the table's order."""
    return [rule.code for rule in WARNING_RULES if rule.applies(row)]
