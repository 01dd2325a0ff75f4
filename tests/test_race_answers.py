"""The race's answers leg (`rig race --answers N`): each engine's answers to the same graded
prompts on SmolLM2, side by side after the race table and in the report's Answers section.

Fast: the report and the console from a results folder of runs.csv rows and outputs.jsonl
files as a race leaves them, and --answers' bad values. Engine tier: one real race, llama.cpp
alone, on the real SmolLM2 GGUF (skipped, saying why, where it is not made)."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadtest.race.args import MAX_ANSWERS, parse_args
from loadtest.report.answer_table import shortened
from loadtest.report.cli import main as report
from loadtest.workload.structured import load_tasks, resolve_constraints
from rig_helpers import REPO, free_port, markdown_tables
from servers import smollm2
from servers.local import LOCAL

TASKS, TASKS_SHA256 = load_tasks(resolve_constraints("graded"))
ANSWERS = {"llamacpp-cpu": ["New Delhi", "The order number is 46777."],
           "transformers": ["Mumbai", "<b>46777</b>\n| and more"]}


def _row(run_id: str, engine: str, tag: str, **fields: object) -> dict[str, object]:
    return {"timestamp": f"2026-11-28T10:{len(run_id):02d}:00Z", "run_id": run_id,
            "engine": engine, "model": "tiny-llama", "flags": "", "gpu": "", "users": 1,
            "requests": 56, "completed": 56, "failed": 0, "completion_time_s": 7.0,
            "output_tokens": 3584, "output_tok_per_s": 512.0, "avg_output_tokens": 64.0,
            "tag": tag, "workload": "mixed-56x64", "workload_sha256": "a" * 64,
            "client_cpu_max_pct": 20.0, **fields}


def _answers_row(run_id: str, engine: str, texts: list[str], wrong: list[str]) -> dict[str, object]:
    # the row's model as each engine names it: llama.cpp the alias, transformers the folder
    model = "/repo/models/smollm2-135m" if engine == "transformers" else "smollm2-135m"
    return _row(run_id, engine, "answers", model=model, requests=len(texts),
                completed=len(texts), workload=f"structured-graded-{len(texts)}x32",
                workload_sha256="b" * 64, constraints="graded", constraints_sha256=TASKS_SHA256,
                answers_graded=len(texts), answers_correct=len(texts) - len(wrong),
                answers_wrong=";".join(wrong))


@pytest.fixture
def raced(tmp_path: Path) -> Path:
    """A race's results: two engines' speed heat, then each one's answers run."""
    rows = [_row("r1", "llamacpp-cpu", "demo"), _row("r22", "transformers", "demo",
                                                     output_tok_per_s=90.0)]
    for number, (engine, texts) in enumerate(ANSWERS.items()):
        wrong = [TASKS[0].task_id] if texts[0] == "Mumbai" else []
        rows.append(_answers_row(f"a{number}" * 3, engine, texts, wrong))
        outputs = tmp_path / "runs" / str(rows[-1]["run_id"]) / "outputs.jsonl"
        outputs.parent.mkdir(parents=True)
        outputs.write_text("".join(json.dumps({"request_id": i, "prompt_id": TASKS[i].task_id,
                                               "text": text, "token_ids": None}) + "\n"
                                   for i, text in enumerate(texts)))
    with (tmp_path / "runs.csv").open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        writer.writeheader()
        writer.writerows(rows)
    return tmp_path


def test_the_report_shows_each_engines_answers_side_by_side(raced: Path):
    assert report([str(raced), "--race", "--where", "tag=demo"]) == 0
    markdown = (raced / "report" / "report.md").read_text()
    answers = markdown[markdown.index("## Answers"):]
    assert "random weights" in answers and "SmolLM2-135M-Instruct" in answers
    assert answers.count("`smollm2-135m`") == 1  # one model, however each engine names it
    table = markdown_tables(answers)[0]
    assert [row["prompt"] for row in table] == [shortened(TASKS[0].prompt),
                                                shortened(TASKS[1].prompt), "right"]
    assert [row["llamacpp-cpu"] for row in table] == ["✓ New Delhi", "✓ The order number is 46777.",
                                                      "2/2"]
    assert [row["transformers"] for row in table] == ["✗ Mumbai", "✓ <b>46777</b> \\| and more",
                                                      "1/2"]
    page = (raced / "report" / "report.html").read_text()
    assert "&lt;b&gt;46777&lt;/b&gt; | and more" in page and "<b>46777</b>" not in page


def test_the_console_prints_the_answers_after_the_race_table(
        raced: Path, capsys: pytest.CaptureFixture[str]):
    assert report([str(raced), "--race", "--where", "tag=demo"]) == 0
    printed = capsys.readouterr().out
    race, answers = printed.index("Race: the fastest engine"), printed.index("Answers (SmolLM2")
    assert race < answers and "| ✗ Mumbai |" in printed[answers:]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # capsys: read each time
@given(value=st.integers().filter(lambda n: not 0 <= n <= MAX_ANSWERS).map(str)
       | st.text().filter(lambda text: not any(c.isdigit() for c in text))
       | st.floats(0, MAX_ANSWERS).map(lambda n: f"{n:.1f}"))
def test_bad_answer_counts_are_one_error_line_and_exit_2(
        value: str, tmp_path_factory: pytest.TempPathFactory,
        capsys: pytest.CaptureFixture[str]):
    out = tmp_path_factory.mktemp("race") / "results"
    with pytest.raises(SystemExit) as exited:
        parse_args(["--out", str(out), f"--answers={value}"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1, err


@pytest.mark.engine
def test_a_race_with_answers_records_them_and_reports_a_graded_score(tmp_path: Path):
    why = LOCAL["llamacpp-cpu"].missing() or smollm2.missing()  # the recipe's binary, its model
    if why:
        pytest.skip(why)
    out = tmp_path / "race"
    done = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "loadtest.race", "--engines",
                           "llamacpp-cpu", "--out", str(out), "--port", str(free_port()),
                           "--answers", "3", "1", "56"],
                          capture_output=True, text=True, cwd=REPO, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = [r for r in csv.DictReader((out / "runs.csv").open()) if r["tag"] == "answers"]
    assert row["engine"] == "llamacpp-cpu" and row["answers_graded"] == "3", row
    assert int(row["answers_correct"]) >= 2, row["answers_wrong"]  # the model's, 100% alone
    assert f"| right | {row['answers_correct']}/3 |" in done.stdout
    assert "## Answers" in (out / "report" / "report.md").read_text()
