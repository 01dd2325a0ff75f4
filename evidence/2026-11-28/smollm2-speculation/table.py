"""The speculation table from run_llamacpp.sh / run_vllm.sh folders: per run (tag), its speed,
the engine's own draft/accept counts (llama.cpp: OUT/acceptance.csv from its log; vLLM: the
row's engine_spec_* columns from its /metrics) and how many answers are the same text as the
non-speculative run's (the tag whose K is 0 or whose name starts "none", same prompt set and
users).

    .venv/bin/python evidence/2026-11-28/smollm2-speculation/table.py OUT... > table.txt"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd


def answers(run_dir: Path) -> dict[str, str]:
    lines = (run_dir / "outputs.jsonl").read_text().splitlines()
    return {record["prompt_id"]: record["text"] for record in map(json.loads, lines)}


def main(folders: list[Path]) -> None:
    for out in folders:
        runs = pd.read_csv(out / "runs.csv")
        counts = {}
        if (out / "acceptance.csv").is_file():
            for line in (out / "acceptance.csv").read_text().splitlines():
                tag, drafted, accepted, load = line.split(",")
                counts[tag] = (int(drafted), int(accepted), load)
        texts = {row.tag: answers(out / "runs" / row.run_id) for row in runs.itertuples()}
        for row in runs.itertuples():
            rest = row.tag.split("-")[1:]  # the prompt set, and -uN where USERS was given
            base = next(tag for tag in texts if tag.split("-")[1:] == rest
                        and tag.split("-")[0] in ("k0", "none"))
            same = sum(texts[row.tag][p] == texts[base].get(p) for p in texts[row.tag])
            drafted, accepted, load = counts.get(row.tag, (
                getattr(row, "engine_spec_drafted_tokens", float("nan")),
                getattr(row, "engine_spec_accepted_tokens", float("nan")), "?"))
            rate = f"{100 * accepted / drafted:.0f}%" if drafted and drafted == drafted else "-"
            print(f"{out.name} {row.tag}: {row.output_tok_per_s:.1f} tok/s, TTFT p50 "
                  f"{row.ttft_p50_ms:.0f} ms, ITL p50 {row.itl_p50_ms:.1f} ms, e2e p50 "
                  f"{row.e2e_p50_ms:.0f} ms, {row.output_tokens} output tokens; drafted {drafted}, "
                  f"accepted {accepted} ({rate}); answers same as {base}: {same}/{len(texts[row.tag])}; "
                  f"load {load}; verdict {row.verdict}")


if __name__ == "__main__":
    main([Path(arg) for arg in sys.argv[1:]])
