"""`rig latency` (scripts/latency.sh): the comparison studies' latency preset of the race.

    rig latency vllm-cpu llamacpp-cpu vllm-offline transformers-generate ctranslate2:int8

The race's legs at one user, over servers and in-process engines alike: each ENGINE in turn is
started (a local server on 127.0.0.1:PORT, measured by the rig's client through the launcher,
then stopped; or an in-process engine, `python -m loadtest.inprocess`), warmed up (not
recorded), run N requests R times (the short mixed prompts, M output tokens exactly, tagged
latency), and the studies' table printed and written to OUT/latency.md with OUT/latency.png
(loadtest/inprocess/latency.py). An engine that cannot run is said and the others go on.
Engines run on the cores --engine-cpus names (default: all but the first), the servers' client
on the rest, as the race lays them out. Installs what the engines need first
(scripts/install.sh, scripts/install_inprocess.sh), once the arguments are good.

Exit: 0 every engine ran every request, 1 an engine could not run or requests failed (the
others still run), 2 bad arguments.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from loadtest.cpus import complete_layout
from loadtest.inprocess.engines import SpecError, parse_spec
from loadtest.launch.options import add_run_options
from loadtest.toolkit.args import RigParser, command_prog, fail
from loadtest.toolkit.repo import REPO
from loadtest.toolkit.types import cpu_list, port, positive_int, writable_folder
from servers.local import LOCAL

__all__ = ["TAG", "Preset", "checked_args", "main", "parser"]

TAG = "latency"
PROMPTS = "mixed"  # the short prompts, each twice at the default 18 requests
WARMUP_REQUESTS = {"server": 4, "in-process": 2}  # first requests pay one-off costs; not recorded
_INSTALLED = "RIG_LATENCY_INSTALLED"  # set for the rig's own Python, once the installs are done


@dataclass(frozen=True)
class Preset:
    """The preset's arguments, checked: the engines, each a local server or an in-process
    engine, and the layout filled in ("" for not pinned)."""

    engines: tuple[str, ...]
    out: Path
    requests: int
    repeats: int
    max_tokens: int
    port: int
    engine_cpus: str
    client_cpus: str
    gpu: str

    def in_process(self) -> list[str]:
        return [engine for engine in self.engines if engine not in LOCAL]


def parser() -> RigParser:
    p = RigParser(
        prog=command_prog("rig latency"),
        description="The comparison studies' latency preset of the race: one user, a warm-up "
                    "excluded, the short\nmixed prompts, M output tokens exactly, N requests "
                    "repeated R times, tagged latency, over\nservers and in-process engines "
                    "alike. Prints the studies' table (platform, options, gpu, avg\ntok/s, avg "
                    "time, avg output tokens, the per-request tok/s spread) and writes it to\n"
                    "OUT/latency.md with OUT/latency.png; a re-run adds runs. Installs what the "
                    "engines need\nfirst (scripts/install.sh, scripts/install_inprocess.sh).",
        epilog="ENGINE: a local server (" + ", ".join(LOCAL) + "),\n"
               "  started on 127.0.0.1:PORT, measured by the rig's client, then stopped; or an "
               "in-process\n  engine ENGINE[:VARIANT] (rig inprocess --help lists them: "
               "vllm-offline,\n  transformers-generate[:streamer], ctranslate2[:float32|:int8], "
               "llama-cpp-python).\n"
               "Engines run on the cores --engine-cpus names, the servers' client on the rest, "
               "as the race\nlays them out.\n\n"
               "example:\n  rig latency vllm-cpu llamacpp-cpu vllm-offline transformers-generate "
               "ctranslate2:int8\n"
               "exit: 0 every engine ran every request, 1 an engine could not run or requests "
               "failed (the\nothers still run), 2 bad arguments")
    p.add_argument("engines", nargs="*", metavar="ENGINE", help="the engines, in this order")
    p.add_argument("--out", type=writable_folder, default=Path("results/latency"),
                   help="results folder; a re-run adds runs (default results/latency)")
    add_run_options(p, "requests", helps={"requests": "requests per repeat (default 18: each "
                                                      "prompt twice)"})
    p.add_argument("--repeats", type=positive_int, default=3,
                   help="runs of the requests per engine (default 3)")
    add_run_options(p, "max_tokens", "gpu", helps={
        "max_tokens": "output tokens per request, exactly (--ignore-eos, or the engine's own "
                      "equivalent)"})
    p.add_argument("--port", type=port, default=8000,
                   help="the port a local server serves on (default 8000)")
    p.add_argument("--engine-cpus", type=cpu_list, default=None,
                   help="the engines' cores (default: all but the first; the client the rest)")
    p.set_defaults(requests=18, max_tokens=200)
    return p


def checked_args(argv: Sequence[str]) -> Preset:
    """The preset's arguments, every check made (one `error:` line and exit 2), nothing started
    or installed."""
    p = parser()
    args, unknown = p.parse_known_args(list(argv))
    if unknown:
        fail(f"unknown option {unknown[0]} (see {p.prog} --help)")
    if not args.engines:
        fail(f"name at least one ENGINE (see {p.prog} --help)")
    if len(set(args.engines)) < len(args.engines):
        fail("an ENGINE is named twice")
    for engine in args.engines:
        if engine not in LOCAL:
            try:
                parse_spec(engine)
            except SpecError as exc:
                fail(f"{exc}; or a local server: {', '.join(LOCAL)}")
    try:
        engine_cpus, client_cpus = complete_layout(args.engine_cpus or "", "")
    except ValueError as exc:
        fail(str(exc))
    return Preset(tuple(args.engines), args.out, args.requests, args.repeats, args.max_tokens,
                  args.port, engine_cpus, client_cpus, args.gpu)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    preset = checked_args(argv)
    if not os.environ.get(_INSTALLED):
        _install(preset)
        if importlib.util.find_spec("locust") is None:  # a bare python3 before the installs
            python = str(REPO / ".venv" / "bin" / "python")
            sys.stdout.flush()
            os.execve(python, [python, "-m", "loadtest.race.latency", *argv],
                      {**os.environ, _INSTALLED: "1"})
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _measure(preset)
    except KeyboardInterrupt:
        print("** latency preset interrupted (the engine it had started was stopped)",
              file=sys.stderr)
        return 130


def _install(preset: Preset) -> None:
    """What the engines need: the rig and the local servers, and each in-process engine's."""
    _call([str(REPO / "scripts" / "install.sh")])
    slugs = [parse_spec(engine)[0].slug.replace("transformers-generate", "transformers")
             for engine in preset.in_process()]
    if slugs:
        _call([str(REPO / "scripts" / "install_inprocess.sh"), *slugs])


def _call(cmd: list[str]) -> None:
    code = subprocess.call(cmd, cwd=REPO)
    if code != 0:
        raise SystemExit(code)


def _measure(preset: Preset) -> int:
    from loadtest.inprocess.latency import main as table

    preset.out.mkdir(parents=True, exist_ok=True)
    status = 0
    for engine in preset.engines:
        print(f"== {engine}", file=sys.stderr)
        leg = _server if engine in LOCAL else _in_process
        status = max(status, leg(preset, engine))
    out = str(preset.out)
    sys.stdout.flush()
    if table([out, "--tag", TAG, "--md", f"{out}/latency.md", "--png", f"{out}/latency.png"]):
        status = 1
    return status


def _in_process(preset: Preset, engine: str) -> int:
    from loadtest.launch.command import default_python

    cmd = [default_python(), "-m", "loadtest.inprocess", engine, "--batch", "1",
           "--requests", str(preset.requests), "--max-tokens", str(preset.max_tokens),
           "--repeats", str(preset.repeats),
           "--warmup-requests", str(WARMUP_REQUESTS["in-process"]), "--tag", TAG,
           "--out", str(preset.out)]
    cmd += ["--engine-cpus", preset.engine_cpus] if preset.engine_cpus else ["--no-pin"]
    cmd += ["--gpu", preset.gpu] if preset.gpu else []
    print(f"+ {shlex.join(cmd)}", file=sys.stderr)
    sys.stdout.flush()
    code = subprocess.call(cmd)
    if code != 0:
        print(f"** {engine}: exit {code}; the others go on", file=sys.stderr)
        return 1
    return 0


def _server(preset: Preset, engine: str) -> int:
    """The race's leg at one user: start the engine, warm it up, run the repeats, stop it."""
    from loadtest.launch import RunSpec, command, run
    from loadtest.local_engine import EngineStartError, LocalEngine

    log = preset.out / f"engine-{engine}.log"
    local = LocalEngine(preset.port, log_path=log, engine=engine,
                        cpus=preset.engine_cpus or None)
    try:
        local.start()
    except EngineStartError as exc:
        print(f"error: {exc}", file=sys.stderr)
        print(f"** {engine} did not start (log: {log}); the others go on", file=sys.stderr)
        return 1
    print(local.healthy_line(engine), flush=True)  # as `python -m loadtest.local_engine start`
    spec = RunSpec.of(engine=engine, host=f"http://127.0.0.1:{preset.port}", users=1,
                      only_summary=True, out=preset.out, max_tokens=preset.max_tokens,
                      ignore_eos=True, gpu=preset.gpu or None, cpus=preset.client_cpus or None,
                      flags=local.flags or None)
    try:
        code = run(spec.with_(requests=WARMUP_REQUESTS["server"], warmup=True),
                   preset.out / f"warmup-{engine}.log").exit_code
        for repeat in range(1, preset.repeats + 1):
            if code > 1:  # could not run: no repeat would
                break
            measured = spec.with_(requests=preset.requests, tag=TAG, repeat=repeat)
            print(f"+ {shlex.join(command(measured))}", file=sys.stderr)
            sys.stdout.flush()
            code = run(measured).exit_code or code  # the last failure's code, as the script's
    finally:
        local.stop()
    if code != 0:
        print(f"** {engine}: exit {code}; the others go on", file=sys.stderr)
        return 1
    return 0


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    """SIGTERM ends the preset as Ctrl-C does: the running engine is stopped on the way out."""
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
