"""An engine as a local process: the embedded vLLM CPU engine, llama.cpp, transformers.

    python -m loadtest.local_engine start --engine vllm-cpu --port 8000 --log F --pidfile P
    python -m loadtest.local_engine stop --pidfile P
    python -m loadtest.local_engine list

`start` returns once the engine's health path answers 200 (or exits 2 with the log's tail); the
engine runs in its own process group so `stop` (SIGTERM, then SIGKILL after a grace period) ends
all of it (and any descendant that left the group). An engine a rig command starts for its own
use (the race, sweeps, benches) also gets SIGTERM from the kernel if that command dies without
stopping it (SIGKILL, a closed terminal's SIGHUP, the OOM killer); `start`'s outlives it. What
differs per engine (command, environment, install check) is its recipe
(``RECIPE`` in servers/<slug>.py); each engine runs from its own venv or build, apart from the rig's.

Clean by default: `start` pins the engine to every core but the first (loadtest/cpus.py's
layout) unless given `--cpus` or `--no-pin`. Every engine started here is written down in a
state file (``state_dir()``, one per port: pid, engine, cores, and its command as it ran
(``LocalEngine.flags``: its argv and the variables that set it up, secrets hidden)), so that a
run against it on this host pins its client to the other cores by itself (``pin_client_beside``;
a client of more processes than the engine leaves cores takes the missing ones from the engine)
and records that command as its flags unless told others (``started_flags``), and `list`
shows it.
"""

from __future__ import annotations

import argparse

import ctypes
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from loadtest.toolkit.args import RigParser, command_prog
from loadtest.launch.processes import group_members, stop_process_group
from loadtest.toolkit.types import cpu_list, port, positive_number
from loadtest.cpus import (allowed_cpus, checked_cpus, cpu_set, default_layout, format_cpus,
                           pin_process, take_client_cores)
from loadtest.results.redact import redact
from servers.gpus import MULTI_GPU_ENV
from servers.local import LOCAL, LocalRecipe
from servers.vllm_cpu import ENGINE_PYTHON, TINY_MODEL

__all__ = ["ENGINE_PYTHON", "TINY_MODEL", "LocalEngine", "EngineStartError", "command_line",
           "engine_cores_at", "pin_client_beside", "recipe", "started_engine_at", "started_engines",
           "started_flags", "state_dir", "stop_group"]

_STOP_GRACE_S = 20
# how often a starting engine is asked for its health: llama.cpp is up in about a second
_HEALTH_POLL_S = 0.2
_PR_SET_PDEATHSIG = 1
# looked up once here, not in every forked child before its exec
_PRCTL = (getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)
          if sys.platform == "linux" else None)


class EngineStartError(RuntimeError):
    """The engine did not become healthy; the message carries the tail of its log."""


def recipe(slug: str) -> LocalRecipe:
    """The local recipe for ``slug``; EngineStartError names the engines that have one."""
    if slug not in LOCAL:
        raise EngineStartError(f"no local launcher for {slug!r}; local engines: {', '.join(LOCAL)}")
    return LOCAL[slug]


class LocalEngine:
    def __init__(self, port: int = 8000, extra_args: list[str] = (),
                 log_path: Path | None = None, engine: str = "vllm-cpu",
                 cpus: str | None = None, compute_cpus: str | None = None,
                 env: dict[str, str] | None = None, detached: bool = False) -> None:
        """``cpus``: the cores the whole engine may use (taskset); ``compute_cpus``: where its
        compute threads go, for engines that bind them (default: ``cpus``); ``env``: variables
        set for this engine alone (e.g. CUDA_VISIBLE_DEVICES for one replica per GPU);
        ``detached``: the engine outlives this process (`start`'s); otherwise the kernel sends
        it SIGTERM when this process dies without stopping it (SIGKILL, SIGHUP, out of memory)."""
        self.recipe = recipe(engine)
        self.cpus = _cpu_list(cpus)
        self.compute_cpus = _cpu_list(compute_cpus) or self.cpus
        self.port = port
        self.extra_args = list(extra_args)
        self.env = dict(env or {})
        self.log_path = log_path or Path(f"/tmp/llm-load-rig-engine-{port}.log")
        self.detached = detached
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def model_name(self) -> str:
        return self.recipe.model_name

    @property
    def flags(self) -> str:
        """The command it runs, as a run records it: command_line of its argv and of the
        variables that set it up (shown_environment), secrets hidden."""
        return command_line(self.command(), self.shown_environment())

    def command(self) -> list[str]:
        pin = ["taskset", "-c", self.cpus] if self.cpus else []
        return [*pin, *self.recipe.command(self.port, self.extra_args)]

    def shown_environment(self) -> dict[str, str]:
        """The variables of its environment that set it up: those the rig sets for it, and
        those it reads itself (its recipe's ``env_prefixes``: VLLM_..., LLAMA_ARG_...) as this
        process hands them on, less those its command unsets (the rig's own settings names)."""
        env = self.environment()
        set_here = {**MULTI_GPU_ENV, **self.recipe.env, **self._bound(), **self.env}
        read = {name for name in env if self.recipe.env_prefixes
                and name.startswith(self.recipe.env_prefixes)}
        unset = unset_names(self.recipe.command(self.port, self.extra_args))
        return {name: env[name] for name in sorted({*set_here, *read}) if name not in unset}

    def _bound(self) -> dict[str, str]:
        return self.recipe.bind_compute(self.compute_cpus) if self.compute_cpus else {}

    def environment(self) -> dict[str, str]:
        return {**os.environ, **MULTI_GPU_ENV, **self.recipe.env, **self._bound(), **self.env}

    def start(self, timeout_s: float = 600) -> None:
        try:
            self.launch()
            self.wait_healthy(timeout_s)
        except BaseException:  # interrupted or failed: never leave the engine behind
            self.stop()
            raise

    def launch(self) -> None:
        """Start the process and return at once; start() also waits until it is healthy."""
        why = self.recipe.missing()
        if why:
            raise EngineStartError(why)
        if _healthy(self.url):
            raise EngineStartError(f"something already answers on {self.url}; stop it first")
        env = self.environment()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True, preexec_fn=None if self.detached else _die_with_parent)
        self._write_state()

    def wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise EngineStartError(f"engine exited ({self.process.returncode}):\n{self.log_tail()}")
            if _healthy(self.url, self.recipe.health_path):
                return
            time.sleep(_HEALTH_POLL_S)
        raise EngineStartError(f"engine not healthy after {timeout_s:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        """Stop the engine's whole process group, also when its first process has already died:
        a crashed vLLM API server leaves its EngineCore child running in the group."""
        if self.process is not None:
            try:
                stop_process_group(self.process, grace_s=_STOP_GRACE_S)
            finally:
                _state_file(self.port).unlink(missing_ok=True)

    def _write_state(self) -> None:
        """Say on this host that the rig started this engine here, on these cores; a failure to
        write only costs the client its automatic pinning."""
        assert self.process is not None
        state = {"pid": self.process.pid, "engine": self.recipe.slug, "port": self.port,
                 "url": self.url, "cpus": self.cpus or "", "log": str(self.log_path),
                 "flags": self.flags, "binds_compute": bool(self._bound())}
        try:
            _state_file(self.port).parent.mkdir(parents=True, exist_ok=True)
            _state_file(self.port).write_text(json.dumps(state) + "\n")
        except OSError:
            pass

    def healthy_line(self, name: str) -> str:
        """What `start` says once the engine answers: where, its cores, its log."""
        assert self.process is not None
        where = "every core"
        if self.cpus:
            where = (f"cores {self.cpus}; a run against it pins its client to "
                     f"{format_cpus(allowed_cpus() - cpu_set(self.cpus))}")
        return (f"{name} healthy at {self.url} (pid {self.process.pid}, {where}, "
                f"log {self.log_path})")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> "LocalEngine":
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def command_line(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """A command as runs.csv records it, secrets hidden: its variables (NAME=VALUE, sorted),
    then its argv, quoted as a shell would need them. The rig's one spelling of an engine's
    command, so that an engine started alike reads alike, however it was started."""
    words = [f"{name}={value}" for name, value in sorted((env or {}).items())]
    return redact(shlex.join([*words, *argv]))


def unset_names(argv: Sequence[str]) -> set[str]:
    """The variables an `env -u NAME ...` at the head of `argv` removes."""
    if argv[:1] != ["env"]:
        return set()
    names, words = set(), list(argv[1:])
    while len(words) >= 2 and words[0] == "-u":
        names.add(words[1])
        words = words[2:]
    return names


def _die_with_parent() -> None:
    """In the engine's first process, before its command runs: SIGTERM when the rig's thread that
    started it ends (Linux's PR_SET_PDEATHSIG; kept across taskset's exec). Nothing elsewhere."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _cpu_list(cpus: str | None) -> str | None:
    """`cpus` checked against the cores this process may use, or EngineStartError."""
    if not cpus:
        return None
    try:
        checked_cpus(cpus, "--cpus")
    except ValueError as exc:
        raise EngineStartError(str(exc)) from None
    return cpus


def stop_group(pid: int) -> None:
    """SIGTERM the process group, then SIGKILL what is left after a grace period (the rig's one
    way, loadtest/launch/processes.py; kept under this name for its callers)."""
    stop_process_group(pid, grace_s=_STOP_GRACE_S)


def state_dir() -> Path:
    """Where engines started by the rig are written down: $RIG_STATE_DIR, else
    $XDG_RUNTIME_DIR/llm-load-rig/engines, else a per-user folder in the temp dir."""
    if os.environ.get("RIG_STATE_DIR"):
        return Path(os.environ["RIG_STATE_DIR"])
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "llm-load-rig" / "engines"
    return Path(tempfile.gettempdir()) / f"llm-load-rig-{os.getuid()}" / "engines"


def _state_file(port: int) -> Path:
    return state_dir() / f"{port}.json"


def started_engines() -> list[dict[str, Any]]:
    """The engines the rig started on this host that still run (stale files are removed)."""
    found = []
    for path in sorted(state_dir().glob("*.json")):
        try:
            state = json.loads(path.read_text())
            os.kill(int(state["pid"]), 0)
        except ProcessLookupError:
            path.unlink(missing_ok=True)
            continue
        except (OSError, ValueError, KeyError, TypeError):
            continue
        found.append(state)
    return found


def started_engine_at(url: str) -> dict[str, Any] | None:
    """The engine the rig started at ``url`` when it is on this host, else None."""
    parsed = urlparse(url)
    if parsed.hostname not in ("127.0.0.1", "localhost", "::1", "0.0.0.0"):
        return None
    return next((s for s in started_engines() if s.get("port") == parsed.port), None)


def started_flags(url: str, behind: Sequence[str] = ()) -> str | None:
    """The flags the rig started its engine at ``url`` on this host with, or the replicas
    behind the balancer there (``behind``; each distinct value, joined by " | "); None when
    that engine, or any of those replicas, is not one the rig started here (or its state file,
    from an older rig, does not say)."""
    direct = started_engine_at(url)
    states = [direct] if direct is not None else [started_engine_at(u) for u in behind]
    if not states or any(s is None or not isinstance(s.get("flags"), str) for s in states):
        return None
    return " | ".join(dict.fromkeys(str(s["flags"]) for s in states))  # type: ignore[index]


def pin_client_beside(url: str, no_pin: bool = False, behind: Sequence[str] = (),
                      processes: int | None = None) -> str:
    """Pin this process (every thread of it) to the cores the rig's engine at ``url`` leaves
    free, and say what was done: the row's ``client_pinned_by``, one of

        rig: ...     pinned here, beside the engine
        apart: ...   already on other cores (a taskset of the caller's is kept)
        shared: ...  on the engine's cores (--no-pin, an unpinned engine, no core left)
        none: ...    no engine the rig started at this host and port

    ``behind``: the replicas' own URLs when ``url`` is a balancer in front of them (a sweep's
    local replicas behind nginx): the client keeps off the first such engine's cores.
    ``processes``: the client's Locust processes, given by the one process that lays the client
    out (the master): where the engine leaves fewer free cores, the missing ones are taken
    from its share (loadtest/cpus.py take_client_cores; the engine is moved off them and its
    state file says so); ValueError when they cannot be. None (a worker): nothing is taken.
    """
    engine = next((e for e in map(started_engine_at, (url, *behind)) if e is not None), None)
    if engine is None:
        return "none: no engine the rig started at this host and port"
    name = f"{engine['engine']} (pid {engine['pid']})"
    if not engine.get("cpus"):
        return f"shared: {name} may use every core"
    engine_cores, mine = cpu_set(engine["cpus"]), allowed_cpus()
    if not mine & engine_cores:
        return f"apart: beside {name} on {engine['cpus']}"
    if no_pin:
        return f"shared: --no-pin, beside {name} on {engine['cpus']}"
    rest, took = mine - engine_cores, ""
    if processes is not None and len(rest) < processes:
        engine_cores, took = _take_from(engine, mine, processes)
        rest = mine - engine_cores
    if not rest:
        return f"shared: {name} on {engine['cpus']} leaves this client no core"
    pin_process(0, rest)
    return f"rig: beside {name} on {format_cpus(engine_cores)}{took}"


def _take_from(engine: dict[str, Any], mine: set[int], processes: int) -> tuple[set[int], str]:
    """Move the engine off the cores a client of `processes` processes lacks (its lowest), write
    its new cores down, and return them with what the row says of it."""
    cores = cpu_set(engine["cpus"])
    name = f"{engine['engine']} (pid {engine['pid']}) on {engine['cpus']}"
    try:
        left, _ = take_client_cores(cores & mine, mine - cores, processes)
    except ValueError as exc:
        raise ValueError(f"{exc}; beside {name}, start it on fewer cores (--cpus)") from None
    if engine.get("binds_compute"):
        raise ValueError(f"--processes {processes} needs {processes} cores for the client, and "
                         f"{name} binds its compute threads to its cores: start it leaving the "
                         f"client {processes} (--cpus)")
    left |= cores - mine
    for pid in group_members(int(engine["pid"])):
        pin_process(pid, left)
    _write_cores(engine, format_cpus(left))
    return left, f" (was {engine['cpus']}: --processes {processes} took {format_cpus(cores - left)})"


def _write_cores(engine: dict[str, Any], cpus: str) -> None:
    """The engine's state file with its cores now; a failure to write leaves the old ones."""
    try:
        _state_file(int(engine["port"])).write_text(json.dumps({**engine, "cpus": cpus}) + "\n")
    except (OSError, KeyError, ValueError):
        pass


def engine_cores_at(url: str, behind: Sequence[str] = ()) -> str:
    """The cores of the engine the rig started at ``url`` (or the first replica behind it) on
    this host, as its state file says now; "" when there is none or it is not pinned."""
    engine = next((e for e in map(started_engine_at, (url, *behind)) if e is not None), None)
    return str(engine.get("cpus") or "") if engine is not None else ""


def _healthy(url: str, path: str = "/health") -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url + path, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def parser() -> RigParser:
    p = RigParser(
        prog=command_prog("python -m loadtest.local_engine"),
        description="Start, stop or list engines run as local processes of this machine.",
        epilog="examples:\n  python -m loadtest.local_engine start --engine vllm-cpu --port 8000 "
               "--pidfile /tmp/vllm.pid\n  python -m loadtest.local_engine list\n"
               "  python -m loadtest.local_engine stop --pidfile /tmp/vllm.pid\n"
               "exit: 0 done, 2 bad input or the engine did not start (one error: line)")
    p.add_argument("action", choices=["start", "stop", "list"])
    p.add_argument("--engine", default="vllm-cpu", choices=sorted(LOCAL))
    p.add_argument("--port", type=port, default=8000)
    p.add_argument("--pidfile", type=Path, default=None, help="required by start and stop")
    p.add_argument("--log", type=Path, default=None)
    p.add_argument("--timeout", type=positive_number, default=600,
                        help="seconds to wait for the engine's health (default 600)")
    p.add_argument("--cpus", type=cpu_list, default=None,
                        help="cores the engine may use, e.g. 1 or 2-15 (default: all but the first)")
    p.add_argument("--no-pin", action="store_true", help="leave the engine on every core")
    p.add_argument("--compute-cpus", type=cpu_list, default=None,
                        help="cores for its compute threads, where it binds them (default --cpus)")
    p.add_argument("extra", nargs="*", help="extra engine flags, after --")
    return p


def parse_words(cli: RigParser, words: list[str]) -> argparse.Namespace:
    """The engine's own flags follow "--" wherever the action stands (argparse alone gives them
    to the action's positional slot and refuses them when the action comes first)."""
    cut = words.index("--") if "--" in words else len(words)
    args = cli.parse_args(words[:cut])
    args.extra = [*args.extra, *words[cut + 1:]]
    return args


def main(argv: list[str] | None = None) -> int:
    cli = parser()
    args = parse_words(cli, list(sys.argv[1:] if argv is None else argv))
    if args.action == "list":
        for state in started_engines():
            print(f"{state['engine']} {state['url']} pid {state['pid']} "
                  f"cpus {state.get('cpus') or 'all'} log {state.get('log', '-')}\n"
                  f"  {state.get('flags') or '(its command: not written down by this rig)'}")
        return 0
    if args.pidfile is None:
        cli.error(f"{args.action} needs --pidfile")
    if args.action == "stop":
        return _stop(args.pidfile)
    folder = args.pidfile.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        cli.error(f"--pidfile {args.pidfile}: no folder there this user can write to")
    cpus = args.cpus
    if cpus is None and not args.no_pin:
        cpus = default_layout()[0] or None  # fewer than two cores: nothing to keep apart
    try:
        engine = LocalEngine(args.port, extra_args=args.extra, log_path=args.log, engine=args.engine,
                             cpus=cpus, compute_cpus=args.compute_cpus, detached=True)
        engine.start(args.timeout)
    except EngineStartError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    assert engine.process is not None
    try:
        args.pidfile.write_text(str(engine.process.pid))
    except OSError as exc:  # an engine nobody could stop by its pidfile must not keep running
        engine.stop()
        print(f"error: --pidfile {args.pidfile}: {exc.strerror or exc}; the engine was stopped",
              file=sys.stderr)
        return 2
    print(engine.healthy_line(args.engine))
    return 0


def _stop(pidfile: Path) -> int:
    if pidfile.exists():
        pid = int(pidfile.read_text())
        stop_group(pid)
        pidfile.unlink()
        for state in state_dir().glob("*.json"):
            try:
                if json.loads(state.read_text()).get("pid") == pid:
                    state.unlink()
            except (OSError, ValueError):
                continue
    return 0


if __name__ == "__main__":
    sys.exit(main())
