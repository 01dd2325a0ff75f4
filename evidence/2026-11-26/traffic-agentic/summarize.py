"""The table of evidence/2026-11-26/traffic-agentic/README.md from run.sh's results folder.
usage: .venv/bin/python evidence/2026-11-26/traffic-agentic/summarize.py OUT"""

import csv
import json
import sys
from pathlib import Path


def main(out: Path) -> None:
    print("| speed | engine | verdict | output tok/s | TTFT from schedule p50 / p99 (ms) "
          "| e2e from schedule p99 (ms) | send lag p99 (ms) | sub-agents' TTFT p99 from schedule (ms) |")
    print("|---|---|---|---:|---|---:|---:|---:|")
    for speed in sorted(out.glob("x*")):
        if not (speed / "runs.csv").exists():
            continue
        for row in csv.DictReader((speed / "runs.csv").open()):
            agents = json.loads((speed / "runs" / row["run_id"] / "run.json").read_text()).get(
                "agents", {})
            sub = agents.get("sub-agents", {}).get("ttft_sched_p99_ms")
            print(f"| {speed.name} | {row['engine']} | {row['verdict']} | "
                  f"{float(row['output_tok_per_s']):,.0f} | {float(row['ttft_sched_p50_ms']):,.0f} / "
                  f"{float(row['ttft_sched_p99_ms']):,.0f} | {float(row['e2e_sched_p99_ms']):,.0f} | "
                  f"{float(row['send_lag_p99_ms']):,.1f} | "
                  + ("-" if sub is None else f"{sub:,.0f}") + " |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
