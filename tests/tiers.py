"""The test tiers: which tests start an engine, and a watch that catches one that says it doesn't.

`scripts/test.sh --fast` runs `-m "not engine and not docker"`: every test that starts no
engine, no Docker and no build. A test is in the `engine` tier when it is marked so, when it
uses a fixture that starts an engine (ENGINE_FIXTURES), or when its module says so. The watch
samples this process's descendants while each unmarked test runs; one that appears during the
test with an engine's command line (ENGINE_COMMANDS) fails the test with the marker it lacks,
so the fast tier cannot quietly grow an engine start.
"""

from __future__ import annotations

import os
import threading

import psutil

__all__ = ["ENGINE_FIXTURES", "EngineWatch", "engine_command"]

# Fixtures that start (or reuse) a real engine: a test that asks for one is an engine test.
ENGINE_FIXTURES = frozenset({"engine_url", "vllm_adapters_reasoning", "engine", "local_run",
                             "baseline", "sustained"})

# Command-line fragments of the processes an engine test starts (the engines, in-process
# engine workers, Docker, native builds).
ENGINE_COMMANDS = ("vllm.entrypoints", "vllm serve", "aphrodite.entrypoints", "bin/llama-server",
                   "transformers serve", "transformers.cli", "loadtest.inprocess.worker", "dockerd", "docker run",
                   "docker compose up", "docker build", "cmake", "build_llamacpp")

# An engine lives for seconds; each sample walks /proc (about 2 ms), in every fast test.
_SAMPLE_S = 0.2


def engine_command(cmdline: list[str]) -> str | None:
    """The engine fragment `cmdline` matches, or None."""
    text = " ".join(cmdline)
    return next((fragment for fragment in ENGINE_COMMANDS if fragment in text), None)


class EngineWatch:
    """Samples this process's descendants in a thread; `seen` is the first engine command."""

    def __init__(self) -> None:
        self.seen: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._me = psutil.Process(os.getpid())
        # Engines already running (a session fixture's, started by an earlier engine test) are
        # not this test's: only a process that appears while it runs counts.
        self._before = {child.pid for child in self._me.children(recursive=True)}

    def __enter__(self) -> "EngineWatch":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.is_set() and self.seen is None:
            for child in self._me.children(recursive=True):
                if child.pid in self._before:
                    continue
                try:
                    match = engine_command(child.cmdline())
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    continue
                if match:
                    self.seen = f"{match!r} (pid {child.pid}: {' '.join(child.cmdline())[:120]})"
                    return
            self._stop.wait(_SAMPLE_S)  # returns at once when the test ends
