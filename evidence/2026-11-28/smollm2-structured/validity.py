"""Validity and cost per run of a run_structured.sh folder: every kept answer checked by the
rig's own rule (loadtest/workload/answers.py), the unconstrained ones too (the rig leaves those
unchecked: here they say whether the model follows the instruction without a grammar).

    .venv/bin/python evidence/2026-11-28/smollm2-structured/validity.py OUT > validity.txt"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

from loadtest.workload.answers import AnswerChecks
from loadtest.workload.structured import load_tasks, resolve_constraints

CHECKS = {name: AnswerChecks(load_tasks(resolve_constraints(name))[0]) for name in ("json", "regex")}


def verdicts(run_dir: Path, constraints: str) -> Counter[str]:
    """The rig's verdicts, with its rule for an answer cut at max_tokens (`cut`, not the
    constraint's failure)."""
    stops = {record["request_id"]: record["finish_reason"] for record in
             map(json.loads, (run_dir / "requests.jsonl").read_text().splitlines())}
    counts: Counter[str] = Counter()
    for record in map(json.loads, (run_dir / "outputs.jsonl").read_text().splitlines()):
        verdict = CHECKS[constraints].verdict(record["prompt_id"], record["text"], [])
        cut = verdict != "valid" and stops.get(record["request_id"]) == "length"
        counts["cut" if cut else verdict] += 1
    return counts


def main(out: Path) -> None:
    runs = pd.read_csv(out / "runs.csv")
    for run in runs.itertuples():
        constraints = next(part for part in run.tag.split("-") if part in CHECKS)  # json or regex
        counts = verdicts(out / "runs" / run.run_id, constraints)
        print(f"{run.tag}: {dict(counts)}; output tok/s {run.output_tok_per_s:.1f}, TTFT p50 "
              f"{run.ttft_p50_ms:.0f} ms, e2e p50 {run.e2e_p50_ms:.0f} ms, "
              f"{run.avg_output_tokens:.1f} output tokens per answer; {run.warnings}; "
              f"verdict {run.verdict} {run.verdict_reasons if isinstance(run.verdict_reasons, str) else ''}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
