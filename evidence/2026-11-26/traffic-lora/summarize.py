"""The table of evidence/2026-11-26/traffic-lora/README.md (and ../traffic-lora-llamacpp's) from
run.sh's results folder, one line per condition in the order they ran.
usage: .venv/bin/python evidence/2026-11-26/traffic-lora/summarize.py OUT"""

import csv
import json
import statistics
import sys
from pathlib import Path


def main(out: Path) -> None:
    rows = list(csv.DictReader((out / "runs.csv").open()))
    print("| condition | runs (verdict) | output tok/s per run | TTFT p50 / p99 (ms, mean) "
          "| ITL p50 (ms) | adapters' TTFT p99 (ms, lowest-highest, each run) |")
    print("|---|---|---|---|---|---|")
    for tag in dict.fromkeys(r["tag"] for r in rows):
        mine = [r for r in rows if r["tag"] == tag]
        if not mine:
            continue
        spreads = []
        for r in mine:
            adapters = json.loads((out / "runs" / r["run_id"] / "run.json").read_text()).get(
                "adapters", {})
            if adapters:
                p99 = [a["ttft_p99_ms"] for a in adapters.values()]
                spreads.append(f"{min(p99):.0f}-{max(p99):.0f} ({len(p99)})")
        mean = lambda key: statistics.fmean(float(r[key]) for r in mine)  # noqa: E731
        verdicts = ", ".join(r["verdict"] for r in mine)
        rates = ", ".join(f"{float(r['output_tok_per_s']):,.0f}" for r in mine)
        print(f"| {tag} | {len(mine)} ({verdicts}) | {rates} | "
              f"{mean('ttft_p50_ms'):.0f} / {mean('ttft_p99_ms'):.0f} | {mean('itl_p50_ms'):.1f} | "
              f"{'; '.join(spreads) or '-'} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
