"""What the fifth lease's lanes left (fetch's out/ folder, unpacked) into the evidence folders:
each results folder's runs.csv as runs-NAME.csv, each run's run.json and telemetry_summary.json,
and, where answers were kept, answers.jsonl (each run's distinct answers per prompt, with counts).

usage: python3 collect.py OUT_DIR   (from this folder)"""
import csv
import json
import shutil
import sys
from collections import Counter, defaultdict
from pathlib import Path

# results folder on the host -> (evidence folder, runs-NAME.csv)
FOLDERS = {
    "race8b-vllm": ("race8b-h200", "vllm"), "race8b-sglang": ("race8b-h200", "sglang"),
    "race8b-aphrodite": ("race8b-h200", "aphrodite"), "race8b-llamacpp": ("race8b-h200", "llamacpp"),
    "race8b-textgen": ("race8b-h200", "textgen-exl3"), "exl3-8b": ("race8b-h200", "exl3"),
    "vllm-1b": ("batch1-h200-host2", "vllm-1b"), "llamacpp-1b": ("batch1-h200-host2", "llamacpp-1b"),
    "textgen-llamacpp-1b": ("batch1-h200-host2", "textgen-llamacpp-1b"),
    "transformers-1b": ("batch1-h200-host2", "transformers-1b"),
    "smollm2-matrix": ("smollm2-h200-matrix", "vllm"), "smollm2-aphrodite": ("smollm2-h200-matrix", "aphrodite"),
}


def answers(run: Path, engine: str, tag: str) -> list[dict]:
    texts: dict[str, Counter] = defaultdict(Counter)
    for line in (run / "outputs.jsonl").open():
        record = json.loads(line)
        texts[record["prompt_id"]][record["text"]] += 1
    return [{"engine": engine, "tag": tag, "prompt_id": prompt,
             "answers": [{"text": t, "count": n} for t, n in counts.most_common()]}
            for prompt, counts in sorted(texts.items())]


def main(out: Path) -> None:
    kept: dict[str, list[dict]] = defaultdict(list)
    for source, (folder, name) in FOLDERS.items():
        here = Path("..") / folder
        shutil.copy(out / source / "runs.csv", here / f"runs-{name}.csv")
        for row in csv.DictReader((out / source / "runs.csv").open()):
            run = out / source / "runs" / Path(row["run_dir"]).name
            target = here / "runs" / run.name
            target.mkdir(parents=True, exist_ok=True)
            for file in ("run.json", "telemetry_summary.json"):
                if (run / file).exists():
                    shutil.copy(run / file, target / file)
            if (run / "outputs.jsonl").exists():
                kept[folder] += answers(run, row["engine"], row["tag"])
    for folder, lines in kept.items():
        with open(Path("..") / folder / "answers.jsonl", "w") as file:
            file.writelines(json.dumps(line) + "\n" for line in lines)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
