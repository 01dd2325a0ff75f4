"""The embedded default engine (vLLM on CPU, tiny model) as a local process.

    python -m loadtest.local_engine start --port 8000 --log results/engine.log --pidfile F
    python -m loadtest.local_engine stop --pidfile F

`start` returns once /health answers 200 (or exits 2 with the log's tail); the engine runs in
its own process group so `stop` (SIGTERM, then SIGKILL after a grace period) ends all of it.
It runs from the engine's own venv (.venv-vllm, made by scripts/install.sh), apart from the rig's.
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

__all__ = ["ENGINE_PYTHON", "TINY_MODEL", "LocalEngine", "EngineStartError"]

REPO = Path(__file__).resolve().parents[1]
ENGINE_PYTHON = Path(os.environ.get("RIG_ENGINE_PYTHON", REPO / ".venv-vllm" / "bin" / "python"))
TINY_MODEL = REPO / "models" / "tiny-llama"
_STOP_GRACE_S = 20


class EngineStartError(RuntimeError):
    """The engine did not become healthy; the message carries the tail of its log."""


class LocalEngine:
    def __init__(self, port: int = 8000, model: Path = TINY_MODEL, extra_args: list[str] = (),
                 log_path: Path | None = None, kv_cache_gib: int = 2) -> None:
        self.port = port
        self.model = model
        self.extra_args = list(extra_args)
        self.log_path = log_path or Path(f"/tmp/llm-load-rig-engine-{port}.log")
        self.kv_cache_gib = kv_cache_gib
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [str(ENGINE_PYTHON), "-m", "vllm.entrypoints.openai.api_server",
                "--model", str(self.model), "--served-model-name", self.model.name,
                "--host", "127.0.0.1", "--port", str(self.port), "--dtype", "bfloat16",
                "--max-model-len", "2048", *self.extra_args]

    def start(self, timeout_s: float = 600) -> None:
        if not ENGINE_PYTHON.exists():
            raise EngineStartError(f"no engine venv at {ENGINE_PYTHON}: run scripts/install.sh")
        if not (self.model / "config.json").exists():
            raise EngineStartError(f"no model at {self.model}: run scripts/install.sh")
        if _healthy(self.url):
            raise EngineStartError(f"something already answers on {self.url}; stop it first")
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib),
               "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            env=env, start_new_session=True)
        try:
            self.wait_healthy(timeout_s)
        except BaseException:  # interrupted or failed: never leave the engine behind
            self.stop()
            raise

    def wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise EngineStartError(f"engine exited ({self.process.returncode}):\n{self.log_tail()}")
            if _healthy(self.url):
                return
            time.sleep(1)
        raise EngineStartError(f"engine not healthy after {timeout_s:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
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


def _healthy(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url + "/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.local_engine")
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--pidfile", type=Path, required=True)
    parser.add_argument("--log", type=Path, default=None)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("extra", nargs="*", help="extra vLLM flags, after --")
    args = parser.parse_args(argv)
    if args.action == "stop":
        if args.pidfile.exists():
            stop_group(int(args.pidfile.read_text()))
            args.pidfile.unlink()
        return 0
    engine = LocalEngine(args.port, extra_args=args.extra, log_path=args.log)
    try:
        engine.start(args.timeout)
    except EngineStartError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    assert engine.process is not None
    args.pidfile.write_text(str(engine.process.pid))
    print(f"engine healthy at {engine.url} (pid {engine.process.pid}, log {engine.log_path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
