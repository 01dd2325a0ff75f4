"""The report's reasoning and structured-output sections (loadtest/report/traffic.py), from rows
as runs.csv holds them."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from loadtest.report.traffic import answers_section, constraint_cost, reasoning_section


@dataclass
class _Report:
    blocks: list[tuple[str, str]] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)

    def heading(self, level: int, text: str) -> None:
        self.blocks.append(("h", text))

    def text(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, markdown: str) -> None:
        self.blocks.append(("table", markdown))


def _row(**values) -> dict:
    return {"engine": "vllm-cpu", "flags": "", "workload": "w", "users": 4, "completed": 8,
            "output_tok_per_s": 100.0, "ttft_p50_ms": 20.0, "itl_p50_ms": 5.0,
            "e2e_p50_ms": 200.0, **values}


def test_runs_without_reasoning_or_constraints_get_neither_section():
    report = _Report()
    runs = pd.DataFrame([_row()])
    reasoning_section(report, runs)
    answers_section(report, runs)
    assert report.blocks == []


def test_a_reasoning_run_shows_ttfa_beside_ttft_and_tokens_only_where_counted():
    runs = pd.DataFrame([
        _row(reasoning_requests=8, reasoning_unanswered=1, ttfa_p50_ms=400.0, ttfa_p99_ms=650.0,
             switch_p50_ms=29.0, reasoning_chunks=37, answer_chunks=24,
             reasoning_tokens=float("nan"), answer_tokens=float("nan"),
             reasoning_tokens_source="none"),
        _row(engine="sglang", reasoning_requests=8, reasoning_unanswered=0, ttfa_p50_ms=300.0,
             ttfa_p99_ms=320.0, switch_p50_ms=9.0, reasoning_chunks=60, answer_chunks=20,
             reasoning_tokens=60, answer_tokens=22, reasoning_tokens_source="usage"),
        _row(engine="plain")])
    report = _Report()
    reasoning_section(report, runs)
    [table] = [content for kind, content in report.blocks if kind == "table"]
    lines = table.splitlines()
    assert len(lines) == 4 and "plain" not in table
    assert "| 7/8 |" not in lines[2] and "| 8/8 | 1 | 20.0 | 400.0 | 650.0 | 29.0 | 37 | 24 | - | - |" in lines[2]
    assert "| 60 (usage) | 22 (usage) |" in lines[3]


def test_the_constraints_cost_is_each_constrained_run_over_its_unconstrained_twin():
    on = dict(constraints="json", constraints_sha256="abc", answers_checked=8, answers_valid=6,
              answers_valid_pct=75.0, answer_failures="not_json=2")
    runs = pd.DataFrame([
        _row(constrained="True", output_tok_per_s=80.0, ttft_p50_ms=30.0, **on),
        _row(constrained="True", output_tok_per_s=60.0, ttft_p50_ms=50.0, **on),  # a repeat
        _row(constrained="False", constraints="json", constraints_sha256="abc"),
        _row(constrained="True", users=8, **on),  # no unconstrained twin at 8 users
        _row(engine="llamacpp-cpu", constrained="True", **on)])
    cost = constraint_cost(runs)
    assert len(cost) == 1
    [line] = cost.to_dict("records")
    assert (line["engine"], line["users"]) == ("vllm-cpu", 4)
    assert line["output_tok_per_s"] == 0.7 and line["ttft_p50_ms"] == 2.0
    report = _Report()
    answers_section(report, runs)
    tables = [content for kind, content in report.blocks if kind == "table"]
    assert len(tables) == 2 and "6/8 (75%)" in tables[0] and "not_json=2" in tables[0]
    assert "| vllm-cpu | json | 4 | 0.70x | 2.00x | 1.00x | 1.00x |" in tables[1]


def test_a_column_that_one_runs_csv_lacks_is_still_read_as_numbers(tmp_path):
    from loadtest.report.runset import load_runs
    from loadtest.results.files import append_run_row
    base = {"timestamp": "2026-11-26T20:00:00Z", "engine": "vllm-cpu", "users": 4,
            "workload": "w", "workload_sha256": "s", "verdict": "valid", "completed": 8}
    append_run_row(tmp_path / "a" / "runs.csv", {**base, "run_id": "a"})
    append_run_row(tmp_path / "b" / "runs.csv", {**base, "run_id": "b", "reasoning_requests": 8,
                                                 "ttfa_p50_ms": 12.5})
    runs = load_runs(tmp_path)
    assert runs["reasoning_requests"].tolist()[1] == 8 and pd.isna(runs["reasoning_requests"][0])
    report = _Report()
    reasoning_section(report, runs)  # compares numbers: no error on the run without them
    assert any(kind == "table" for kind, _ in report.blocks)


def test_graded_runs_show_their_score_and_the_tasks_answered_wrong():
    graded = dict(constraints="graded", constraints_sha256="g", constrained="True",
                  answers_graded=278, answers_correct=277, answers_correct_pct=99.64,
                  answers_wrong="capital-00")
    report = _Report()
    answers_section(report, pd.DataFrame([_row(**graded)]))
    [table] = [content for kind, content in report.blocks if kind == "table"]
    assert "| correct | wrong tasks |" in table and "| 277/278 (99.6%) | capital-00 |" in table
