"""How many distinct answers each run gave per prompt, and whether a speculative run's answers are
the non-speculative run's (the same set, or at least one shared), from the runs' kept outputs.

    python3 answers.py OUT...   (run_llamacpp.sh's folders)"""
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path


def texts(out: Path, run_id: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for line in (out / "runs" / run_id / "outputs.jsonl").open():
        record = json.loads(line)
        found[record["prompt_id"]].add(record["text"])
    return found


for out in map(Path, sys.argv[1:]):
    runs = {r["tag"]: texts(out, r["run_id"]) for r in csv.DictReader((out / "runs.csv").open())}
    for tag, answers in runs.items():
        base = runs["k0-" + tag.split("-", 1)[1]]
        print(f"{out.name} {tag}: {sum(map(len, answers.values()))} distinct answers to {len(answers)} "
              f"prompts; the same set as K=0's for {sum(answers[p] == base[p] for p in answers)}, "
              f"one shared for {sum(bool(answers[p] & base[p]) for p in answers)}")
