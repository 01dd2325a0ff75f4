"""text-generation-webui (llama.cpp loader) against the bare llama-server it drives: same binary,
same GGUF, same llama-server flags, same core. Appends to OUT/runs.csv (the rig's rows) and
OUT/engine.csv (per run: its llama-server's own counters, and the client latencies without
textgen's opening chunk).

    .venv/bin/python evidence/2026-11-25/textgen-cpu/race.py OUT [--rounds 2] [--users 1,8,32]
    .venv/bin/python evidence/2026-11-25/textgen-cpu/race.py OUT --summarize    # the README's table

Engines, each started fresh in each round and pinned to core 1 (textgen's API process and its
llama-server together), the rig's client pinned to core 0:
  llama-server   the rig's build with exactly the flags textgen's loader gave its own
  textgen-p128   textgen-cpu's recipe: 128 slots, so no generation lock
  textgen-p1     upstream's default --parallel 1: its generation lock, one request at a time
The engines' order rotates each round; each runs its user counts rising, after a warm-up.
textgen-p1 runs no user count above LOCK_THREADS: there it deadlocks (--deadlock-check shows it).

    .venv/bin/python evidence/2026-11-25/textgen-cpu/race.py OUT --deadlock-check 40,41

starts textgen-p1 and, for each user count, runs the rig for DEADLOCK_WINDOW_S seconds and
counts what its llama-server generated meanwhile (appended to OUT/deadlock.csv).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import psutil

from loadtest.local_engine import stop_group
from servers.llamacpp_cpu import LLAMA_SERVER
from servers.textgen_cpu import INNER_PORT_OFFSET, SPEC as TEXTGEN_SPEC, command as textgen_command

REPO = Path(__file__).resolve().parents[2]
ENGINE_CORE, CLIENT_CORE = "1", "0"
MAX_TOKENS = 64
PORT = 5300
# anyio's default thread limit: textgen runs each streaming request's generator on one of these
# worker threads, and with its generation lock a request waits for the lock *on* its thread.
LOCK_THREADS = 40
DEADLOCK_WINDOW_S = 60


def get(url: str, timeout: float = 5) -> bytes:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as response:
        return response.read()


def healthy(url: str) -> bool:
    try:
        get(url)
        return True
    except OSError:
        return False


class Engine:
    """One engine as a pinned process group; ``metrics`` is its llama-server's /metrics URL."""

    def __init__(self, name: str, argv: list[str], health: str, metrics: str, log: Path) -> None:
        self.name, self.argv, self.health, self.metrics, self.log = name, argv, health, metrics, log
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "Engine":
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(["taskset", "-c", ENGINE_CORE, *self.argv], stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 180
        while not healthy(self.health):
            assert self.process.poll() is None, f"{self.name} exited: see {self.log}"
            assert time.monotonic() < deadline, f"{self.name} not healthy: see {self.log}"
            time.sleep(0.5)
        return self

    def __exit__(self, *_: object) -> None:
        assert self.process is not None
        stop_group(self.process.pid)
        self.process.wait()


def textgen(slots: int, log: Path) -> Engine:
    argv = textgen_command(PORT, ["--parallel", str(slots)])
    return Engine(f"textgen-p{slots}", argv, f"http://127.0.0.1:{PORT}/v1/internal/health",
                  f"http://127.0.0.1:{PORT + INNER_PORT_OFFSET}/metrics", log)


def inner_argv(log: Path) -> list[str]:
    """The llama-server command line textgen's loader builds (textgen-p128), as it ran."""
    with textgen(128, log) as engine:
        assert engine.process is not None
        [server] = [p for p in psutil.Process(engine.process.pid).children(recursive=True)
                    if p.exe() == str(LLAMA_SERVER.resolve())]
        return server.cmdline()


def bare(argv: list[str], log: Path) -> Engine:
    port = argv.index("--port") + 1
    argv = [*argv[:port], str(PORT), *argv[port + 1:]]
    return Engine("llama-server", argv, f"http://127.0.0.1:{PORT}/health",
                  f"http://127.0.0.1:{PORT}/metrics", log)


def counters(url: str) -> dict[str, float]:
    lines = get(url).decode().splitlines()
    return {name.removeprefix("llamacpp:"): float(value)
            for name, value in (line.split() for line in lines if line and not line.startswith("#"))}


class Sampler(threading.Thread):
    """Polls requests_processing (slots busy) while a run goes on: its peak and mean."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.samples, self.done = url, [], threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.25):
            try:
                self.samples.append(counters(self.url)["requests_processing"])
            except (OSError, KeyError):
                pass


def locust(engine: Engine, users: int, requests: int, out: Path, tag: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(locust_command(engine, users, requests, out, tag), capture_output=True, text=True,
                          cwd=REPO, timeout=600)


def locust_command(engine: Engine, users: int, requests: int, out: Path, tag: str) -> list[str]:
    slug = "llamacpp-cpu" if engine.name == "llama-server" else "textgen-cpu"
    return ["taskset", "-c", CLIENT_CORE, str(REPO / ".venv/bin/locust"), "-f", str(REPO / "loadtest/engines.py"),
            "--headless", "--only-summary", "--host", f"http://127.0.0.1:{PORT}", "--engine", slug,
            "--users", str(users), "--requests", str(requests), "--max-tokens", str(MAX_TOKENS), "--ignore-eos",
            "--out", str(out), "--tag", tag, "--flags", " ".join(engine.argv[1:])]


# Whether this rig counts textgen's opening chunk (an empty one it sends before it generates)
# as the first token: it did until its target said empty_chunk_is_token=False (round 1 here).
RIG_COUNTS_OPENING_CHUNK = getattr(TEXTGEN_SPEC.target, "empty_chunk_is_token", True)


def latencies(out: Path, run_id: str, opening_chunk: bool) -> dict[str, float]:
    """TTFT, ITL and TPOT from the run's records; where the rig counted textgen's opening
    chunk as its first token, that chunk is dropped."""
    [path] = out.glob(f"runs/{run_id}/requests.jsonl")
    ttft, gaps, tpot, e2e = [], [], [], []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r["error_kind"] is not None or r["ttft_ms"] is None:  # None: no text ever streamed
            continue
        first, rest = r["ttft_ms"], [g / 1e6 for g in r["chunk_gaps_ns"]]
        if opening_chunk and rest:
            first, rest = first + rest[0], rest[1:]
        ttft.append(first)
        gaps += rest
        e2e.append(r["e2e_ms"])
        tpot.append((r["e2e_ms"] - first) / (MAX_TOKENS - 1))
    q = lambda xs, p: statistics.quantiles(xs, n=100)[p - 1] if len(xs) > 1 else xs[0]  # noqa: E731
    return {"ttft_p50_ms": q(ttft, 50), "ttft_p90_ms": q(ttft, 90), "itl_p50_ms": q(gaps, 50),
            "itl_p90_ms": q(gaps, 90), "tpot_mean_ms": statistics.fmean(tpot), "e2e_p50_ms": q(e2e, 50),
            "chunks_per_request": (len(gaps) + len(ttft)) / len(ttft)}


def race(engine: Engine, users: list[int], out: Path, round_no: int, table: Path) -> None:
    with engine:
        locust(engine, 1, 8, out / "warmup", f"warmup-{engine.name}")
        for n in users:
            if engine.name == "textgen-p1" and n > LOCK_THREADS:
                print(f"textgen-p1: {n} users skipped (deadlocks past {LOCK_THREADS})", flush=True)
                continue
            requests = max(32, 2 * n)
            before, sampler = counters(engine.metrics), Sampler(engine.metrics)
            sampler.start()
            load = os.getloadavg()[0]
            result = locust(engine, n, requests, out, f"{engine.name}-r{round_no}")
            sampler.done.set()
            sampler.join()
            after = counters(engine.metrics)
            with (out / "runs.csv").open(newline="") as file:
                row = list(csv.DictReader(file))[-1]
            delta = {k: after[k] - before.get(k, 0.0) for k in ("tokens_predicted_total", "n_decode_total")}
            busy = (after["n_busy_slots_per_decode"] * after["n_decode_total"]
                    - before["n_busy_slots_per_decode"] * before["n_decode_total"]) / max(delta["n_decode_total"], 1)
            line = {"round": round_no, "engine": engine.name, "users": n, "requests": requests,
                    "run_id": row["run_id"], "exit": result.returncode, "completed": row["completed"],
                    "failed": row["failed"], "seconds": row["completion_time_s"],
                    "tokens_generated": int(delta["tokens_predicted_total"]),
                    "tok_per_s": delta["tokens_predicted_total"] / float(row["completion_time_s"]),
                    "decode_steps": int(delta["n_decode_total"]), "busy_slots_per_step": round(busy, 2),
                    "processing_peak": max(sampler.samples, default=0),
                    "processing_mean": round(statistics.fmean(sampler.samples), 2) if sampler.samples else 0,
                    "rig_ttft_p50_ms": row["ttft_p50_ms"], "rig_output_tokens": row["output_tokens"],
                    "loadavg_1m": round(load, 2),
                    **{k: round(v, 2) for k, v in latencies(out, row["run_id"], engine.name != "llama-server" and RIG_COUNTS_OPENING_CHUNK).items()}}
            new = not table.exists()
            with table.open("a", newline="") as file:
                writer = csv.DictWriter(file, fieldnames=list(line))
                if new:
                    writer.writeheader()
                writer.writerow(line)
            print(json.dumps(line), flush=True)


def deadlock_check(users: list[int], out: Path) -> None:
    """textgen-p1 under `users` streams for DEADLOCK_WINDOW_S: tokens its llama-server made."""
    table = out / "deadlock.csv"
    with textgen(1, out / "logs" / "textgen-p1-deadlock.log") as engine:
        locust(engine, 1, 8, out / "warmup", "warmup-textgen-p1")
        for n in users:
            before = counters(engine.metrics)["tokens_predicted_total"]
            cmd = locust_command(engine, n, 4 * n, out / "deadlock", f"deadlock-u{n}")
            client = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
            time.sleep(DEADLOCK_WINDOW_S)
            after = counters(engine.metrics)
            finished = client.poll() is not None
            client.terminate()
            client.wait()
            line = {"users": n, "window_s": DEADLOCK_WINDOW_S, "run_finished": finished,
                    "tokens_generated": int(after["tokens_predicted_total"] - before),
                    "processing_at_end": after["requests_processing"],
                    "tokens_not_generated": 4 * n * MAX_TOKENS - int(after["tokens_predicted_total"] - before)}
            new = not table.exists()
            with table.open("a", newline="") as file:
                writer = csv.DictWriter(file, fieldnames=list(line))
                if new:
                    writer.writeheader()
                writer.writerow(line)
            print(json.dumps(line), flush=True)
            if not finished:  # a deadlocked server stays so: the next count needs a fresh one
                break


def summarize(out: Path) -> None:
    """A markdown table of OUT/engine.csv: per engine and user count, the median over rounds and
    the range (min-max) of each measure, textgen's cost as its ratio to the bare server's."""
    with (out / "engine.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    measures = ("tok_per_s", "ttft_p50_ms", "tpot_mean_ms", "itl_p50_ms", "e2e_p50_ms", "busy_slots_per_step")
    cell: dict[tuple[str, int], dict[str, list[float]]] = {}
    for row in rows:
        one = cell.setdefault((row["engine"], int(row["users"])), {m: [] for m in measures})
        for m in measures:
            one[m].append(float(row[m]))
    print("| engine | users | rounds | " + " | ".join(measures) + " |")
    print("|---|---:|---:|" + "---:|" * len(measures))
    for (engine, users), values in sorted(cell.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        shown = [f"{statistics.median(v):.0f} ({min(v):.0f}-{max(v):.0f})" if m != "busy_slots_per_step"
                 else f"{statistics.median(v):.1f}" for m, v in values.items()]
        print(f"| {engine} | {users} | {len(values['tok_per_s'])} | " + " | ".join(shown) + " |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--first-round", type=int, default=1, help="to go on with earlier rounds")
    parser.add_argument("--users", default="1,8,32")
    parser.add_argument("--deadlock-check", default="", help="user counts for textgen-p1 alone")
    parser.add_argument("--summarize", action="store_true", help="print OUT/engine.csv as a table")
    args = parser.parse_args()
    if args.summarize:
        summarize(args.out)
        return
    out, users = args.out.resolve(), [int(u) for u in args.users.split(",")]
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    if args.deadlock_check:
        deadlock_check([int(u) for u in args.deadlock_check.split(",")], out)
        return
    argv = inner_argv(logs / "probe.log")
    engines = {"llama-server": lambda r: bare(argv, logs / f"llama-server-r{r}.log"),
               "textgen-p128": lambda r: textgen(128, logs / f"textgen-p128-r{r}.log"),
               "textgen-p1": lambda r: textgen(1, logs / f"textgen-p1-r{r}.log")}
    order = list(engines)
    for round_no in range(args.first_round, args.first_round + args.rounds):
        shift = (round_no - 1) % len(order)
        for name in order[shift:] + order[:shift]:
            race(engines[name](round_no), users, out, round_no, out / "engine.csv")


if __name__ == "__main__":
    main()
