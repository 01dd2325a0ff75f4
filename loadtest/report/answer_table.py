"""The report's Answers section: what each engine said to the same prompts, side by side.

The runs are the race's answers leg (loadtest/race/answers.py): rows tagged `answers`, each
answer's text in its run's outputs.jsonl (--keep-outputs). Of each engine the newest such run is
shown, whatever --where picks (the race's report picks its speed heats by tag). One line per
prompt, one column per engine: each answer on one line, shortened, marked ✓ or ✗ where the run
graded it (the row's answers_wrong names the tasks it got wrong); the prompts' text comes from
the run's tasks file when that is still the file the run read (its constraints_sha256).
"""

from __future__ import annotations

import pandas as pd

from loadtest.report.runset import run_file
from loadtest.report.tables import markdown_table
from loadtest.results.equivalence import OUTPUTS_FILE, EquivalenceError, read_outputs
from loadtest.workload.spec import WorkloadError
from loadtest.workload.structured import load_tasks, resolve_constraints

__all__ = ["ANSWERS_TAG", "MODEL_TEXT", "SHOWN_CHARS", "answer_runs", "answers_markdown",
           "shortened"]

ANSWERS_TAG = "answers"
MODEL_TEXT = ("SmolLM2-135M-Instruct (real weights: llama.cpp its Q4_1 GGUF, vLLM and "
              "transformers the bf16 folder made from it)")
SHOWN_CHARS = 60  # of each answer, on one line


def answer_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The newest run tagged answers of each engine, in the order the engines answered."""
    if runs.empty or "tag" not in runs:
        return runs.iloc[:0]
    tagged = runs[runs["tag"].astype(str) == ANSWERS_TAG]
    return tagged.drop_duplicates("engine", keep="last").sort_values(["timestamp", "run_id"])


def answers_markdown(runs: pd.DataFrame) -> str:
    """The side-by-side table of `runs` (answer_runs), a last line of each engine's score; ""
    when no run kept its answers."""
    answered = {str(run["engine"]): _answers(run) for _, run in runs.iterrows()}
    answered = {engine: texts for engine, texts in answered.items() if texts}
    if not answered:
        return ""
    shown = runs[runs["engine"].astype(str).isin(answered)]
    prompts = _prompts(shown)
    order = list(dict.fromkeys(pid for texts in answered.values() for pid in texts))
    wrong = {str(run["engine"]): _wrong(run) for _, run in shown.iterrows()}
    graded = {str(run["engine"]): _number(run.get("answers_graded")) > 0
              for _, run in shown.iterrows()}
    body = [[shortened(prompts.get(pid, pid)),
             *(_cell(texts.get(pid), graded[engine], pid in wrong[engine])
               for engine, texts in answered.items())] for pid in order]
    body.append(["right", *(_score(run) for _, run in shown.iterrows())])
    return markdown_table(["prompt", *answered], body)


def shortened(text: str, chars: int = SHOWN_CHARS) -> str:
    """`text` on one line (white space runs made one space), cut to `chars` with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= chars else line[:chars - 1].rstrip() + "…"


def _answers(run: pd.Series) -> dict[str, str]:
    """{prompt id: the answer's text} of one run, in request order; {} without its outputs."""
    path = run_file(run, OUTPUTS_FILE)
    if path is None:
        return {}
    try:
        rows = read_outputs(path.parent)
    except (EquivalenceError, OSError, ValueError, KeyError):
        return {}
    return {str(row.get("prompt_id")): str(row.get("text") or "") for _, row in sorted(rows.items())}


def _prompts(runs: pd.DataFrame) -> dict[str, str]:
    """{task id: prompt} from the tasks file each run read, where it is still that file."""
    prompts: dict[str, str] = {}
    for _, run in runs.drop_duplicates("constraints").iterrows():
        try:
            tasks, sha256 = load_tasks(resolve_constraints(str(run.get("constraints") or "")))
        except (WorkloadError, OSError):
            continue
        if sha256 == str(run.get("constraints_sha256")):
            prompts.update({task.task_id: task.prompt for task in tasks})
    return prompts


def _wrong(run: pd.Series) -> set[str]:
    """The tasks the run answered wrong or cut (answers_wrong: id or id=count, joined by ;)."""
    return {name.partition("=")[0] for name in str(run.get("answers_wrong") or "").split(";")
            if name}


def _cell(text: str | None, graded: bool, wrong: bool) -> str:
    if text is None:
        return "-"
    mark = ("✗ " if wrong else "✓ ") if graded else ""
    return mark + (shortened(text) or "(empty)")


def _score(run: pd.Series) -> str:
    graded = _number(run.get("answers_graded"))
    return f"{_number(run.get('answers_correct')):g}/{graded:g}" if graded else "-"


def _number(value: object) -> float:
    number = pd.to_numeric(value, errors="coerce")
    return 0.0 if pd.isna(number) else float(number)
