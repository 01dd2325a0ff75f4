"""Issue 50's lease, read from the kept records: for each run of `rig bench` (the lean reference's
records and the rig's requests.jsonl), what the engine was offered and what each client timed.

    python evidence/2026-11-28/gpu-measurer/analyze.py BENCH_OUT [USERS]

Per run: output tok/s, TTFT p50, and the closed loop's occupancy over its steady window (from
the first send to the last send, before users start running out of work): the mean number of
requests in flight over USERS. Below 1 the users sat idle between one answer and their next
send; by Little's law the mean idle gap per request is (USERS - in flight) / requests per second.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np


def spans(path: Path) -> list[tuple[int, int | None, int, int]]:
    """(sent, first, done, output tokens) per request, ns on one clock per run."""
    out = []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if "sent_ns" in r:  # the rig's record
            if r.get("done_ns") is None or r.get("error_kind"):
                continue
            out.append((r["sent_ns"], r.get("first_chunk_ns"), r["done_ns"], r.get("output_tokens") or 0))
        else:  # the reference client's
            out.append((r["sent"], r.get("first"), r["done"], r.get("tokens") or 0))
    return out


def figures(rows: list[tuple[int, int | None, int, int]], users: int) -> dict[str, float]:
    sent = np.array([r[0] for r in rows], dtype=np.int64)
    done = np.array([r[2] for r in rows], dtype=np.int64)
    first = np.array([r[1] for r in rows if r[1] is not None], dtype=np.int64)
    ttft = np.array([(r[1] - r[0]) / 1e6 for r in rows if r[1] is not None])
    tokens = sum(r[3] for r in rows)
    start, last_send, end = sent.min(), sent.max(), done.max()
    window = (last_send - start) / 1e9
    # time-weighted requests in flight over [start, last_send]
    busy = np.clip(np.minimum(done, last_send) - np.maximum(sent, start), 0, None).sum() / 1e9
    in_flight = busy / window if window > 0 else float("nan")
    sent_in_window = int(((sent >= start) & (sent < last_send)).sum())
    rate = sent_in_window / window if window > 0 else float("nan")
    return {"tok_s": tokens / ((end - start) / 1e9), "ttft_p50_ms": float(np.median(ttft)),
            "ttft_mean_ms": float(ttft.mean()), "occupancy": in_flight / users,
            "idle_gap_ms": 1000 * (users - in_flight) / rate if rate else float("nan"),
            "e2e_mean_ms": float(((done - sent) / 1e6).mean()), "requests": len(rows),
            "first_token_after_send_p50_ms": float(np.median(ttft)) if len(first) else float("nan")}


def main(folder: Path, users: int) -> None:
    bench = list(csv.DictReader((folder / "bench.csv").open()))
    rig_runs = sorted((folder / "runs").glob("*/requests.jsonl"), key=lambda p: p.stat().st_mtime)
    rig_rows = {r["run_id"]: r for r in csv.DictReader((folder / "runs.csv").open())} \
        if (folder / "runs.csv").exists() else {}
    print(f"{'run':<34} {'tok/s':>8} {'TTFT p50':>9} {'mean':>7} {'server':>7} {'occup.':>7} "
          f"{'idle gap':>9} {'e2e mean':>9}")
    for path in sorted(folder.glob(f"reference-u{users}-*.jsonl")):
        f = figures(spans(path), users)
        print(f"{path.stem:<34} {f['tok_s']:8.0f} {f['ttft_p50_ms']:9.1f} {f['ttft_mean_ms']:7.1f} "
              f"{'':>7} {f['occupancy']:7.3f} {f['idle_gap_ms']:8.1f}ms {f['e2e_mean_ms']:8.0f}ms")
    for path in rig_runs:
        run_id = path.parent.name
        f = figures(spans(path), users)
        row = rig_rows.get(run_id, {})
        label = f"rig{'' if row.get('telemetry_engine') else ', telemetry off'} {run_id[-4:]}"
        print(f"{label:<34} {f['tok_s']:8.0f} {f['ttft_p50_ms']:9.1f} {f['ttft_mean_ms']:7.1f} "
              f"{float(row.get('engine_ttft_mean_ms') or 'nan'):7.1f} {f['occupancy']:7.3f} "
              f"{f['idle_gap_ms']:8.1f}ms {f['e2e_mean_ms']:8.0f}ms")
    servers = [(r["client"], r["round"], r.get("server_ttft_mean_ms")) for r in bench]
    print("server's TTFT mean per run (bench.csv):", servers)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 256)
