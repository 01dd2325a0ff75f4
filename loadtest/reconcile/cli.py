"""`rig reconcile RUN_DIR`: a run the rig made, recomputed under each peer tool's published
definitions, beside the rig's own figures, with the cause of every difference in words.

Each definition is one module of this package naming the peer's file and version it follows
(vllm.py, aiperf.py, guidellm.py, llmperf.py, mlperf.py). `--peer-result PEER=PATH` adds the
figures a peer printed itself on the same workload (its result file, read by peers.py), so
what is left once the definitions are matched is the clients' own cost or error.
"""

from __future__ import annotations

import sys
from pathlib import Path

from loadtest.toolkit.args import RigParser, command_prog, fail
from loadtest.toolkit.types import BadValue, one_of
from loadtest.reconcile import DEFINITIONS, rig
from loadtest.reconcile.peers import PEER_RESULTS, PeerError, read_peer_result
from loadtest.reconcile.run import ReconcileError, read_run
from loadtest.reconcile.table import build_rows, render

__all__ = ["main", "parser"]

FORMATS = ("table", "csv", "json")


def _peer_list(text: object) -> list[str]:
    names = [n.strip() for n in str(text).split(",")]
    unknown = [n for n in names if n not in DEFINITIONS]
    if not names or unknown or len(set(names)) != len(names):
        raise BadValue(f"must be peers from {', '.join(DEFINITIONS)}, comma-separated, each "
                       f"once; got {str(text)!r}")
    return names


def _peer_result(text: object) -> tuple[str, Path]:
    name, sep, path = str(text).partition("=")
    if not sep or name not in PEER_RESULTS or not path:
        raise BadValue(f"must be PEER=PATH with PEER one of {', '.join(PEER_RESULTS)}, got "
                       f"{str(text)!r}")
    if not Path(path).exists():
        raise BadValue(f"names no file or folder: {path!r}")
    return name, Path(path)


def parser() -> RigParser:
    p = RigParser(prog=command_prog("python -m loadtest.reconcile.cli"),
                  description=__doc__.split("\n\n")[0],
                  epilog="examples:\n"
                  "  rig reconcile results/runs/20261125T063310Z-vllm-cpu-u32-9d22\n"
                  "  rig reconcile RUN_DIR --peers vllm,guidellm --format csv\n"
                  "  rig reconcile RUN_DIR --peer-result vllm=peers/vllm-1.json\n"
                  "definitions and their sources: docs/reconcile.md")
    p.add_argument("run_dir", metavar="RUN_DIR",
                   help="a run's folder (results/runs/RUN_ID: requests.jsonl and run.json)")
    p.add_argument("--peers", type=_peer_list, default=list(DEFINITIONS),
                   help=f"definitions to recompute (default all: {','.join(DEFINITIONS)})")
    p.add_argument("--format", type=one_of(FORMATS, "format"), default="table",
                   help="table (default), csv or json")
    p.add_argument("--peer-result", type=_peer_result, action="append", default=[],
                   metavar="PEER=PATH", help="a peer's own result file on the same workload "
                   f"({', '.join(PEER_RESULTS)}); its figures get a column 'PEER (own)'")
    return p


def reconcile_text(run_dir: Path, peers: list[str], form: str,
                   peer_results: list[tuple[str, Path]]) -> str:
    run = read_run(run_dir)
    recomputed = {name: DEFINITIONS[name].figures(run) for name in peers}
    reported = {f"{name} (own)": read_peer_result(name, path) for name, path in peer_results}
    rows = build_rows(rig.figures(run), recomputed, reported)
    sources = {rig.NAME: rig.SOURCE, **{n: DEFINITIONS[n].SOURCE for n in peers}}
    return render(rows, form, sources)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        text = reconcile_text(Path(args.run_dir), args.peers, args.format, args.peer_result)
    except (ReconcileError, PeerError) as exc:
        fail(str(exc))
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
