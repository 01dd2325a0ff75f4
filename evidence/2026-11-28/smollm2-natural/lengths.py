"""Each engine's output lengths from a run_natural.sh folder: per run, the answers' lengths
(tokens as the engine reported them), how many stopped on their own (finish_reason stop) and
how many at the cap, and per prompt each engine's length side by side.

    .venv/bin/python evidence/2026-11-28/smollm2-natural/lengths.py OUT > lengths.txt"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd


def requests(out: Path) -> pd.DataFrame:
    runs = pd.read_csv(out / "runs.csv")
    frames = []
    for run in runs.itertuples():
        lines = (out / "runs" / run.run_id / "requests.jsonl").read_text().splitlines()
        frame = pd.DataFrame(map(json.loads, lines))
        frame["engine"] = run.engine
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def main(out: Path) -> None:
    done = requests(out)
    summary = done.groupby("engine")["output_tokens"].describe(percentiles=[0.5])
    summary["stopped"] = done[done["finish_reason"] == "stop"].groupby("engine").size()
    summary["at the cap"] = done[done["finish_reason"] == "length"].groupby("engine").size()
    summary["total"] = done.groupby("engine")["output_tokens"].sum()
    print(summary.fillna(0).round(1).to_string())
    print()
    per_prompt = done.pivot_table(index="prompt_id", columns="engine", values="output_tokens",
                                  aggfunc="first")
    print(per_prompt.to_string())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
