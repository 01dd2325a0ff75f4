"""The ladder's table from a run_ladder.sh folder: one row per run (tag), its tok/s, latency,
peak RSS, graded score and the answers that differ from F16's of the same pass's first run.

    .venv/bin/python evidence/2026-11-28/smollm2-ladder/table.py OUT > table.md
Also writes OUT/answers.jsonl: every run's answers, keyed by tag and prompt_id."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd


def answers(run_dir: Path) -> dict[str, str]:
    lines = (run_dir / "outputs.jsonl").read_text().splitlines()
    return {record["prompt_id"]: record["text"] for record in map(json.loads, lines)}


def verdict(row: object) -> str:
    """The run's verdict as the rig gave it, with its reasons where it is not valid."""
    reasons = row.verdict_reasons if isinstance(row.verdict_reasons, str) else ""
    return f"{row.verdict}: {reasons}" if reasons else str(row.verdict)


def main(out: Path) -> None:
    runs = pd.read_csv(out / "runs.csv")
    memory = pd.read_csv(out / "memory.csv", names=["tag", "vm_hwm_kib", "vm_rss_kib", "load_1m"])
    runs = runs.merge(memory, on="tag", how="left")
    texts = {row.tag: answers(out / "runs" / row.run_id) for row in runs.itertuples()}
    baseline = texts[runs.loc[runs["tag"].str.startswith("gguf-F16-pass1"), "tag"].iloc[0]]
    with (out / "answers.jsonl").open("w") as file:
        for tag, by_prompt in texts.items():
            for prompt_id, text in by_prompt.items():
                file.write(json.dumps({"tag": tag, "prompt_id": prompt_id, "text": text}) + "\n")
    print("| run | requests | output tok/s | TTFT p50 ms | e2e p50 ms | output tokens | peak RSS MiB "
          "| correct | wrong | differ from F16 | load (1 min) | verdict |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in runs.itertuples():
        mine = texts[row.tag]
        differ = sum(mine[p] != baseline[p] for p in mine if p in baseline)
        print(f"| {row.tag} | {row.requests} | {row.output_tok_per_s:.1f} | {row.ttft_p50_ms:.0f} "
              f"| {row.e2e_p50_ms:.0f} | {row.output_tokens:,} | {row.vm_hwm_kib / 1024:.0f} "
              f"| {row.answers_correct}/{row.answers_graded} | {row.answers_wrong if isinstance(row.answers_wrong, str) else '-'} "
              f"| {differ}/{len(mine)} | {row.load_1m} | {verdict(row)} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
