"""`rig peers run`: a peer tool and the rig on the same engine, prompts, output lengths and
concurrency, alternating (rig, peer, rig, peer, ...), then one table: the rig's figures, the
peer's definitions recomputed from the rig's own records, the figures the peer printed itself,
and what is left once the definitions are matched (the clients' own cost or error), with its
spread over the repeats.

Without --host it starts the local engine (--engine) on a free port, pinned apart from the
clients (loadtest/cpus.py's layout: the rig and the peer both on the client cores), and stops it.
Everything lands in --out: the rig's runs (runs.csv, runs/*), the prompts as sent
(prompts.jsonl), each peer repeat's folder (PEER-N/) and its log.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from loadtest.cli.args import RigParser, command_prog, fail
from loadtest.cli.locust import REPO
from loadtest.cli.processes import free_port
from loadtest.cli.types import one_of, positive_int, url, writable_folder
from loadtest.cpus import default_layout
from loadtest.local_engine import TINY_MODEL, EngineStartError, LocalEngine
from loadtest.reconcile import DEFINITIONS, rig
from loadtest.reconcile.figures import Figure
from loadtest.reconcile.peers import (PeerError, peer_command, peer_program, peer_prompts,
                                     read_peer_result)
from loadtest.reconcile.run import ReconcileError, read_run
from loadtest.reconcile.table import build_rows, render
from loadtest.results.files import read_runs
from loadtest.workload import WorkloadError
from loadtest.workload.prompts import load_prompts
from servers.local import LOCAL
from servers.prefix_cache import reset_prefix_cache
from servers.registry import SPECS

__all__ = ["main", "parser"]

RUNNABLE = ("vllm", "aiperf", "guidellm")


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
    p.add_argument("--host", type=url, help="an engine already running (default: start --engine)")
    p.add_argument("--users", type=positive_int, default=8, help="concurrency (default 8)")
    p.add_argument("--requests", type=positive_int, default=64,
                   help="requests per run (default 64)")
    p.add_argument("--max-tokens", type=positive_int, default=64,
                   help="output tokens per request, exact (--ignore-eos) (default 64)")
    p.add_argument("--prompts", default="mixed", help="prompt set or file (default mixed)")
    p.add_argument("--repeats", type=positive_int, default=1,
                   help="rig/peer pairs, alternating (default 1)")
    p.add_argument("--format", type=one_of(("table", "csv", "json"), "format"), default="table",
                   help="table (default), csv or json")
    p.add_argument("--out", type=writable_folder,
                   help="where everything is kept (default results/peers/UTC-PEER-uUSERS)")
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
        with _engine(args, out) as (host, client_cpus):
            pairs = [_pair(args, host, client_cpus, out, prompts_file, n)
                     for n in range(1, args.repeats + 1)]
    except (EngineStartError, PeerError, ReconcileError, RuntimeError) as exc:
        fail(str(exc))
    sys.stdout.write(_table(args.peer, pairs, args.format))
    return 0


@contextmanager
def _engine(args: argparse.Namespace, out: Path) -> Iterator[tuple[str, str]]:
    """(URL, client cores): the engine at --host, or --engine started here and stopped after."""
    if args.host:
        yield args.host, ""
        return
    engine_cpus, client_cpus = default_layout()
    engine = LocalEngine(port=free_port(), engine=args.engine, log_path=out / "engine.log",
                         cpus=engine_cpus or None)
    print(f"starting {args.engine} (log {engine.log_path})", file=sys.stderr)
    engine.start()
    try:
        yield engine.url, client_cpus
    finally:
        engine.stop()


def _pair(args: argparse.Namespace, host: str, client_cpus: str, out: Path, prompts_file: Path,
          repeat: int) -> tuple[Path, dict[str, float]]:
    """One rig run and one peer run on the same workload, the rig first in odd repeats and the
    peer first in even ones (so neither always meets the engine the other warmed): (the rig's
    run folder, the figures the peer reported)."""
    if repeat % 2:
        run_dir = _rig_run(args, host, out, repeat)
        return run_dir, _peer_run(args, host, client_cpus, out, prompts_file, repeat, run_dir)
    model = _served_model(host)
    reported = _peer_run(args, host, client_cpus, out, prompts_file, repeat, None, model)
    return _rig_run(args, host, out, repeat), reported


def _rig_run(args: argparse.Namespace, host: str, out: Path, repeat: int) -> Path:
    rig_out = out / "rig"
    before = {row.get("run_dir") for row in _rows(rig_out)}
    command = [sys.executable, "-m", "loadtest.cli.main", "run", "--engine", args.engine,
               "--host", host, "--users", str(args.users), "--requests", str(args.requests),
               "--max-tokens", str(args.max_tokens), "--ignore-eos", "--prompts", args.prompts,
               "--out", str(rig_out), "--tag", f"peers-{args.peer}", "--repeat", str(repeat)]
    _call(command, out / f"rig-{repeat}.log", "rig run")
    new = [row for row in _rows(rig_out) if row.get("run_dir") not in before]
    if not new:
        raise RuntimeError(f"rig run wrote no row to {rig_out / 'runs.csv'}; see "
                           f"{out / f'rig-{repeat}.log'}")
    return _run_folder(rig_out, new[-1]["run_dir"])


def _peer_run(args: argparse.Namespace, host: str, client_cpus: str, out: Path,
              prompts_file: Path, repeat: int, run_dir: Path | None,
              model: str = "") -> dict[str, float]:
    """The peer on the workload, after emptying the engine's prefix cache as the rig does
    before its own runs."""
    if run_dir is not None:
        model = str(read_run(run_dir).meta.get("model") or model)
    reset = reset_prefix_cache(host, SPECS[args.engine])
    print(f"prefix cache before {args.peer}: {reset}", file=sys.stderr)
    peer_out = out / f"{args.peer}-{repeat}"
    peer_out.mkdir(exist_ok=True)
    command = peer_command(args.peer, host=host, model=model, tokenizer=str(TINY_MODEL),
                           prompts_file=prompts_file, requests=args.requests, users=args.users,
                           max_tokens=args.max_tokens, api=SPECS[args.engine].target.api,
                           out=peer_out)
    if client_cpus:
        command = ["taskset", "-c", client_cpus, *command]
    _call(command, out / f"{args.peer}-{repeat}.log", args.peer)
    return read_peer_result(args.peer, peer_out)


def _served_model(host: str) -> str:
    """The model name the engine serves (GET /v1/models), for a peer run before any rig run."""
    try:
        with urllib.request.urlopen(f"{host}/v1/models", timeout=10) as answer:
            return str(json.load(answer)["data"][0]["id"])
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise RuntimeError(f"cannot read the served model from {host}/v1/models: {exc}") from None


def _rows(folder: Path) -> list[dict[str, str]]:
    return read_runs(folder / "runs.csv") if (folder / "runs.csv").exists() else []


def _run_folder(rig_out: Path, run_dir: str) -> Path:
    """runs.csv's run_dir is relative to where the rig ran (the repository) or absolute."""
    path = Path(run_dir)
    if path.is_absolute() or (REPO / path).is_dir():
        return path if path.is_absolute() else REPO / path
    return rig_out / "runs" / path.name


def _call(command: list[str], log: Path, what: str) -> None:
    shown = [word if "\n" not in word else "'<script>'" for word in command]
    print("+ " + " ".join(shown), file=sys.stderr)
    with log.open("w", encoding="utf-8") as file:
        code = subprocess.call(command, stdout=file, stderr=subprocess.STDOUT, cwd=REPO)
    if code not in (0, 1):  # 1: some requests failed, still a result
        raise RuntimeError(f"{what} failed (exit {code}); see {log}")


def _table(peer: str, pairs: list[tuple[Path, dict[str, float]]], form: str) -> str:
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
    sources = {rig.NAME: rig.SOURCE, peer: DEFINITIONS[peer].SOURCE,
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
