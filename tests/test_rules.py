"""The rules table (loadtest/results/rules.py): every warning and verdict reason once, its
message formatted from the limits its check holds the row to, the checks run from the table
itself, and the docs' table generated from it."""

from __future__ import annotations

import io
import re
import string
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from pathlib import Path

import pytest

from loadtest.results import checks, verdict
from loadtest.results.docs import block, found, main as docs_main
from loadtest.results.rules import REASON_RULES, WARNING_RULES, Rule
from loadtest.results.schema import BY_NAME

REPO = Path(__file__).resolve().parents[1]
WARNING = {rule.code: rule for rule in WARNING_RULES}
REASON = {rule.code: rule for rule in REASON_RULES}
ALL = [*WARNING_RULES, *REASON_RULES]


def test_each_code_once_and_the_printed_texts_are_the_tables():
    for table in (WARNING_RULES, REASON_RULES):
        assert len({rule.code for rule in table}) == len(table)
    assert checks.WARNINGS == {code: rule.text for code, rule in WARNING.items()}
    assert verdict.REASONS == {code: rule.text for code, rule in REASON.items()}


@pytest.mark.parametrize("rule", ALL, ids=lambda rule: rule.code)
def test_a_message_quotes_its_limits_and_no_number_of_its_own(rule: Rule):
    fields = {name for _, name, _, _ in string.Formatter().parse(rule.message) if name}
    assert fields == set(rule.limits), "every limit, and only the limits, in the message"
    bare = set(re.findall(r"(?<![\w.{])\d+(?:\.\d+)?(?![\w}])", rule.message)) - {"429"}
    assert not bare, f"numbers typed into the message instead of taken from its limits: {bare}"
    for value in rule.limits.values():
        assert f"{value:g}" in rule.text


_ABOVE = [  # (rule, the column held to the limit, the limit's name): fires only above it
    (WARNING["client_cpu_high"], "client_cpu_max_pct", "cpu_pct"),
    (REASON["client_overloaded"], "client_cpu_max_pct", "cpu_pct"),
    (REASON["client_overloaded"], "loop_lag_p99_ms", "loop_lag_ms"),
    (REASON["behind_schedule"], "send_lag_p99_ms", "send_lag_ms"),
    (WARNING["clock_sync_loose"], "clock_sync_error_ms", "ms"),
    (WARNING["front_end_saturated"], "engine_front_end_cpu_max_pct", "cpu_pct"),
]


def test_behind_schedule_counts_a_workers_clock_only_in_open_loop():
    rule, limit = REASON["behind_schedule"], REASON["behind_schedule"].limits["send_lag_ms"]
    assert not rule.applies({"clock_sync_error_ms": limit + 1})  # closed loop: no schedule
    assert not rule.applies({"send_lag_p99_ms": 1.0, "clock_sync_error_ms": limit})
    assert rule.applies({"send_lag_p99_ms": 1.0, "clock_sync_error_ms": limit + 0.001})


@pytest.mark.parametrize(("rule", "column", "limit"), _ABOVE,
                         ids=[f"{r.code}-{c}" for r, c, _ in _ABOVE])
def test_a_check_fires_just_past_the_limit_its_table_row_holds(rule: Rule, column: str, limit: str):
    at = rule.limits[limit]
    assert not rule.applies({column: at})
    assert rule.applies({column: at + 0.001})


@pytest.mark.parametrize("rule", [WARNING["short_run"], REASON["short_run"]],
                         ids=["warning", "reason"])
def test_a_run_shorter_than_the_limit_is_short(rule: Rule):
    seconds = rule.limits["seconds"]
    assert not rule.applies({"completion_time_s": seconds})
    assert rule.applies({"completion_time_s": seconds - 0.001})


@pytest.mark.parametrize("rule", [WARNING["too_few_requests"], REASON["too_few_requests"]],
                         ids=["warning", "reason"])
def test_fewer_requests_per_user_than_the_limit_are_too_few(rule: Rule):
    enough = int(rule.limits["per_user"] * 10)
    assert not rule.applies({"users": 10, "requests": enough})
    assert rule.applies({"users": 10, "requests": enough - 1})
    assert not rule.applies({"users": 10, "requests": enough - 1, "rate": 4.0})  # open loop


def test_front_end_lag_needs_both_the_gap_and_the_share():
    rule = REASON["front_end_lag"]
    gap_ms, share = rule.limits["gap_ms"], rule.limits["gap_pct"] / 100
    engine = 1000.0  # a slow engine: the share is the larger bound
    assert not rule.applies({"engine_ttft_mean_ms": engine, "ttft_mean_ms": engine * (1 + share)})
    assert rule.applies({"engine_ttft_mean_ms": engine, "ttft_mean_ms": engine * (1 + share) + 1})
    engine = 10.0  # a fast engine: the gap is
    assert not rule.applies({"engine_ttft_mean_ms": engine, "ttft_mean_ms": engine + gap_ms})
    assert rule.applies({"engine_ttft_mean_ms": engine, "ttft_mean_ms": engine + gap_ms + 1})


@pytest.mark.parametrize("rule", [WARNING["uneven_output_lengths"], REASON["unequal_work"]],
                         ids=["warning", "reason"])
def test_output_lengths_further_apart_than_the_limit_are_uneven(rule: Rule):
    spread = rule.limits["spread_pct"]
    row = {"ignore_eos": True, "max_output_tokens": 100}
    assert not rule.applies({**row, "min_output_tokens": 100 - spread})
    assert rule.applies({**row, "min_output_tokens": 100 - spread - 1})


def test_lengths_asked_per_request_are_judged_each_against_its_own_ask():
    """A trace or agent sessions ask each request its own length: the spread between answers is
    the workload's, not unequal work; one answer off its own ask is."""
    spread = REASON["unequal_work"].limits["spread_pct"]
    row = {"ignore_eos": True, "min_output_tokens": 8, "max_output_tokens": 48}
    assert REASON["unequal_work"].applies(row) and WARNING["uneven_output_lengths"].applies(row)
    kept = {**row, "output_off_asked_max_pct": 0.0}
    assert not REASON["unequal_work"].applies(kept)
    assert not WARNING["uneven_output_lengths"].applies(kept)
    assert not REASON["unequal_work"].applies({**row, "output_off_asked_max_pct": spread})
    assert REASON["unequal_work"].applies({**row, "output_off_asked_max_pct": spread + 0.1})


def test_asked_lengths_are_read_from_each_request_body():
    from loadtest.client.asked_lengths import asked_length_columns
    from loadtest.results.record import RequestRecord
    from loadtest.workload.spec import RequestSpec, Workload

    def spec(i: int, asked: int) -> RequestSpec:
        return RequestSpec(i, f"p{i}", "/v1/completions",
                           b'{"prompt": "say \\"max_tokens\\": 1", "max_tokens": %d}' % asked)

    def record(i: int, got: int | None, error: str | None = None) -> RequestRecord:
        return RequestRecord(request_id=i, prompt_id=f"p{i}", sent_at=0.0, sent_ns=0,
                             output_tokens=got, error_kind=error)

    varied = Workload("trace", [spec(0, 8), spec(1, 48), spec(2, 16)], "x")
    records = [record(0, 8), record(1, 44), record(2, None, "timeout")]
    assert asked_length_columns(varied, records, ignore_eos=True) == {
        "output_off_asked_max_pct": pytest.approx(100 * 4 / 48, abs=0.01)}
    assert asked_length_columns(varied, records, ignore_eos=False) == {}
    one = Workload("fixed", [spec(0, 8), spec(1, 8)], "y")
    assert asked_length_columns(one, [record(0, 8), record(1, 5)], ignore_eos=True) == {}


def test_a_changed_limit_changes_the_check_and_its_message_alike():
    rule = replace(REASON["short_run"], limits={"seconds": 60.0})
    assert rule.applies({"completion_time_s": 30.0})
    assert rule.text.startswith("under 60 s")


def test_every_column_a_rule_reads_is_in_the_schema():
    source = (REPO / "loadtest" / "results" / "rules.py").read_text(encoding="utf-8")
    read = set(re.findall(r'(?:row\.get\(|row\[|_has\(|_starts\()"(\w+)"', source))
    assert {"client_cpu_max_pct", "send_lag_p99_ms", "engine_held_peak"} <= read
    assert read - set(BY_NAME) == set()


def test_the_docs_rules_table_is_the_tables():
    text = (REPO / "docs" / "measurement.md").read_text(encoding="utf-8")
    assert found(text, "rules") == block("rules"), (
        "docs/measurement.md's rules table differs from loadtest/results/rules.py: "
        "run python -m loadtest.results.docs --write docs/measurement.md")


def _docs(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        try:
            code = docs_main(list(argv))
        except SystemExit as exc:
            code = exc.code
    return code, err.getvalue()


def test_the_generator_finds_a_stale_table_and_rewrites_it(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("# p\n\n" + block("rules").replace("| `warmup` |", "| `warmup_old` |") + "\n")
    assert _docs("--check", str(page))[0] == 1
    assert _docs("--write", str(page)) == (0, "")
    assert _docs("--check", str(page)) == (0, "")
    assert found(page.read_text(), "rules") == block("rules")


def test_the_generator_prints_its_help_and_refuses_an_unknown_option_in_one_line():
    assert _docs("--help")[0] == 0
    code, err = _docs("--wirte", "x.md")
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: "), err


@pytest.mark.parametrize("content", [None, "no tables here\n"])
def test_the_generator_refuses_a_page_without_tables_in_one_line(content: str | None,
                                                                  tmp_path: Path):
    page = tmp_path / "page.md"
    if content is not None:
        page.write_text(content)
    code, err = _docs("--write", str(page))
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: "), err
