"""`rig peers run`: a peer tool and the rig on the same engine, prompts, output lengths and
concurrency, alternating (rig, peer, rig, peer, ...), then one table: the rig's figures, the
peer's definitions recomputed from the rig's own records, the figures the peer printed itself,
and what is left once the definitions are matched (the clients' own cost or error), with its
spread over the repeats.

Without --host it starts the local engine (--engine) on a free port, on the engine's side of
loadtest/cpus.py's layout, and stops it after. Either way, when the engine at the URL is one the
rig started on this host (its registry, loadtest/local_engine.py), this process moves itself to
the cores that engine leaves free by the rule the rig's own runs follow (`pin_client_beside`),
before anything is measured: every rig run and every peer it starts inherits those cores, so
both clients meet the engine alike; the table's notes say what was done. Before the first pair,
--warmup-runs unmeasured rig runs of the same workload (kept in --out/warmup, never in the
table) meet the just-started engine instead of the first measured call.

Everything lands in --out: the rig's runs (rig/runs.csv, rig/runs/*), the warm-ups (warmup/),
the prompts as sent (prompts-PEER.jsonl), each peer repeat's folder (PEER-N/) and every log.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import numpy as np

from loadtest.toolkit.args import RigParser, command_prog, fail
from loadtest.launch import RunSpec, run
from loadtest.launch import command as locust_command_of
from loadtest.launch.options import add_run_options
from loadtest.toolkit.repo import REPO
from loadtest.launch.processes import free_port
from loadtest.toolkit.types import non_negative_int, one_of, positive_int, writable_folder
from loadtest.cpus import add_pin_option, allowed_cpus, default_layout, format_cpus
from loadtest.local_engine import TINY_MODEL, EngineStartError, LocalEngine, pin_client_beside
from loadtest.reconcile import DEFINITIONS, rig
from loadtest.reconcile.figures import Figure
from loadtest.reconcile.peers import (PeerError, peer_command, peer_program, peer_prompts,
                                     read_peer_result)
from loadtest.reconcile.run import ReconcileError, read_run
from loadtest.reconcile.table import build_rows, render
from loadtest.workload import WorkloadError
from loadtest.workload.prompts import load_prompts
from servers.local import LOCAL
from servers.prefix_cache import reset_prefix_cache
from servers.registry import SPECS

__all__ = ["Step", "main", "parser", "pin_clients", "plan"]

RUNNABLE = ("vllm", "aiperf", "guidellm")

Step = tuple[Literal["warmup", "rig", "peer"], int]  # what runs, and its number


def parser() -> RigParser:
    p = RigParser(prog=command_prog("python -m loadtest.reconcile.side_by_side"),
                  description=__doc__.split("\n\n")[0],
                  epilog="examples:\n"
                  "  rig peers run --peer vllm --engine vllm-cpu --users 8 --repeats 3\n"
                  "  rig peers run --peer aiperf --engine llamacpp-cpu "
                  "--host http://127.0.0.1:8082\n"
                  "peers install: scripts/install_peers.sh; docs/reconcile.md")
    p.add_argument("--peer", type=one_of(RUNNABLE, "peer"), default="vllm",
                   help=f"the peer tool to run: {', '.join(RUNNABLE)} (default vllm)")
    p.add_argument("--engine", type=one_of(tuple(sorted(LOCAL)), "engine"), default="vllm-cpu",
                   help="the engine (default vllm-cpu); started here unless --host is given")
    add_run_options(p, "host", "users", "requests", "max_tokens", "prompts", helps={
        "host": "an engine already running (default: start --engine)",
        "users": "concurrency", "max_tokens": "output tokens per request, exact (--ignore-eos)"})
    p.add_argument("--repeats", type=positive_int, default=1,
                   help="rig/peer pairs, alternating (default 1)")
    p.add_argument("--warmup-runs", type=non_negative_int, default=1,
                   help="unmeasured rig runs of the same workload before the first pair, so "
                        "no measured run meets a just-started engine (default 1; 0: none)")
    p.add_argument("--format", type=one_of(("table", "csv", "json"), "format"), default="table",
                   help="table (default), csv or json")
    p.add_argument("--out", type=writable_folder,
                   help="where everything is kept (default results/peers/UTC-PEER-uUSERS)")
    add_pin_option(p)
    p.set_defaults(users=8, requests=64, max_tokens=64)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        peer_program(args.peer)
        prompts = load_prompts(args.prompts)
    except (PeerError, WorkloadError) as exc:
        fail(str(exc))
    out = args.out or REPO / "results" / "peers" / (
        f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{args.peer}-u{args.users}")
    out = Path(out).absolute()
    out.mkdir(parents=True, exist_ok=True)
    prompts_file = out / f"prompts-{args.peer}.jsonl"
    texts = [prompts[i % len(prompts)].text for i in range(args.requests)]
    prompts_file.write_text(peer_prompts(args.peer, texts, args.max_tokens), encoding="utf-8")
    try:
        with _engine(args, out) as host:
            pinned = pin_clients(host, args.no_pin)
            print(f"clients: {pinned}", file=sys.stderr)
            pairs = _run(args, host, out, prompts_file)
    except (EngineStartError, PeerError, ReconcileError, RuntimeError) as exc:
        fail(str(exc))
    sys.stdout.write(_table(args.peer, pairs, args.format, _notes(args, out, pinned)))
    return 0


def plan(repeats: int, warmup_runs: int) -> list[Step]:
    """The calls in order: the warm-ups, then each pair, the rig first in odd repeats and the
    peer first in even ones (so neither always meets the engine the other just left)."""
    steps: list[Step] = [("warmup", n) for n in range(1, warmup_runs + 1)]
    for repeat in range(1, repeats + 1):
        pair: list[Step] = [("rig", repeat), ("peer", repeat)]
        steps += pair if repeat % 2 else pair[::-1]
    return steps


def pin_clients(host: str, no_pin: bool = False) -> str:
    """Move this process to the cores the rig's engine at `host` leaves free, as the rig's own
    runs move themselves (local_engine.pin_client_beside: the same registry, the same rule);
    every rig run and peer started after inherits them. What was done, for the table's notes."""
    verdict = pin_client_beside(host, no_pin)
    if verdict.startswith(("rig:", "apart:")):
        return f"the rig and the peer on cores {format_cpus(allowed_cpus())} ({verdict})"
    return f"the rig and the peer not pinned ({verdict})"


@contextmanager
def _engine(args: argparse.Namespace, out: Path) -> Iterator[str]:
    """The engine's URL: --host, or --engine started here (the engine's cores of the default
    layout) and stopped after."""
    if args.host:
        yield args.host
        return
    engine_cpus, _ = default_layout()
    engine = LocalEngine(port=free_port(), engine=args.engine, log_path=out / "engine.log",
                         cpus=engine_cpus or None)
    print(f"starting {args.engine} (log {engine.log_path})", file=sys.stderr)
    engine.start()
    try:
        yield engine.url
    finally:
        engine.stop()


def _run(args: argparse.Namespace, host: str, out: Path,
         prompts_file: Path) -> list[tuple[Path, dict[str, float]]]:
    """Every step of the plan; per repeat (the rig's run folder, the figures the peer printed)."""
    rig_runs: dict[int, Path] = {}
    reported: dict[int, dict[str, float]] = {}
    model = ""  # the model the rig's last run asked for (a rig run always comes first)
    for step, number in plan(args.repeats, args.warmup_runs):
        if step == "peer":
            reported[number] = _peer_run(args, host, out, prompts_file, number, model)
            continue
        run_dir = _rig_run(args, host, out, number, warmup=step == "warmup")
        model = str(read_run(run_dir).meta.get("model") or model)
        if step == "rig":
            rig_runs[number] = run_dir
    return [(rig_runs[n], reported[n]) for n in sorted(rig_runs)]


def _rig_run(args: argparse.Namespace, host: str, out: Path, number: int,
             warmup: bool = False) -> Path:
    """One rig run of the workload (a warm-up: in --out/warmup, no runs.csv row); its folder."""
    name = "warmup" if warmup else "rig"
    spec = RunSpec.of(engine=args.engine, host=host, users=args.users, requests=args.requests,
                      max_tokens=args.max_tokens, ignore_eos=True, prompts=args.prompts,
                      out=out / name, tag=f"peers-{args.peer}", repeat=number, warmup=warmup,
                      no_pin=args.no_pin, cwd=REPO)
    log = out / f"{name}-{number}.log"
    print("+ " + " ".join(locust_command_of(spec)), file=sys.stderr)
    launched = run(spec, log)
    if launched.exit_code not in (0, 1):  # 1: some requests failed, still a result
        raise RuntimeError(f"rig {name} run failed (exit {launched.exit_code}); see {log}")
    run_dir = REPO / launched.run_dir if launched.run_dir else None  # relative: to REPO
    status = _status(run_dir) if run_dir else "missing"
    if run_dir is None or status != "complete":
        raise RuntimeError(f"rig {name} run {number} did not complete (run.json status: "
                           f"{status}); see {log}")
    return run_dir


def _status(run_dir: Path) -> str:
    try:
        return str(json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["status"])
    except (OSError, ValueError, KeyError, TypeError):
        return "unreadable"


def _peer_run(args: argparse.Namespace, host: str, out: Path, prompts_file: Path,
              repeat: int, model: str) -> dict[str, float]:
    """The peer on the workload, after emptying the engine's prefix cache as the rig does
    before its own runs; on this process's cores (pin_clients)."""
    reset = reset_prefix_cache(host, SPECS[args.engine])
    print(f"prefix cache before {args.peer}: {reset}", file=sys.stderr)
    peer_out = out / f"{args.peer}-{repeat}"
    peer_out.mkdir(exist_ok=True)
    command = peer_command(args.peer, host=host, model=model, tokenizer=str(TINY_MODEL),
                           prompts_file=prompts_file, requests=args.requests, users=args.users,
                           max_tokens=args.max_tokens, api=SPECS[args.engine].target.api,
                           out=peer_out)
    _call(command, out / f"{args.peer}-{repeat}.log", args.peer)
    return read_peer_result(args.peer, peer_out)


def _call(command: list[str], log: Path, what: str) -> None:
    shown = [word if "\n" not in word else "'<script>'" for word in command]
    print("+ " + " ".join(shown), file=sys.stderr)
    with log.open("w", encoding="utf-8") as file:
        code = subprocess.call(command, stdout=file, stderr=subprocess.STDOUT, cwd=REPO)
    if code not in (0, 1):  # 1: some requests failed, still a result
        raise RuntimeError(f"{what} failed (exit {code}); see {log}")


def _notes(args: argparse.Namespace, out: Path, pinned: str) -> dict[str, str]:
    """How the runs were made fair, for the table's notes."""
    warmup = (f"{args.warmup_runs} unmeasured rig run(s) of the same workload before the first "
              f"pair ({out / 'warmup'}), not in the table" if args.warmup_runs else
              "none (--warmup-runs 0): the first measured call met the engine as it was")
    return {"clients": pinned, "warm-up": warmup}


def _table(peer: str, pairs: list[tuple[Path, dict[str, float]]], form: str,
           notes: dict[str, str]) -> str:
    """Means over the repeats: the rig, the peer's definitions on the rig's records, the peer's
    own figures, own - recomputed (the clients' own difference) and its spread (max - min)."""
    runs = [read_run(path) for path, _ in pairs]
    rig_figures = [rig.figures(run) for run in runs]
    recomputed = [DEFINITIONS[peer].figures(run) for run in runs]
    own = [figures for _, figures in pairs]
    left = [{k: o[k] - r[k].value for k in o if k in r and r[k].value is not None}
            for o, r in zip(own, recomputed)]
    rows = build_rows(_mean_figures(rig_figures), {peer: _mean_figures(recomputed)},
                      {f"{peer} (own)": _mean(own), "own - recomputed": _mean(left),
                       "spread": _spread(left)})
    sources = {rig.NAME: rig.SOURCE, peer: DEFINITIONS[peer].SOURCE, **notes,
               "runs": ", ".join(str(p) for p, _ in pairs)}
    return render(rows, form, sources)


def _mean_figures(figures: list[dict[str, Figure]]) -> dict[str, Figure]:
    keys = figures[0].keys()
    return {k: Figure(_avg([f[k].value for f in figures if k in f]), figures[0][k].how)
            for k in keys}


def _mean(dicts: list[dict[str, float]]) -> dict[str, float]:
    keys = set().union(*dicts)
    return {k: _avg([d[k] for d in dicts if k in d]) for k in keys}


def _spread(dicts: list[dict[str, float]]) -> dict[str, float]:
    keys = set().union(*dicts)
    return {k: float(np.ptp([d[k] for d in dicts if k in d])) for k in keys}


def _avg(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


if __name__ == "__main__":
    sys.exit(main())
