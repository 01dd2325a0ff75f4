"""The textgen-cpu comparison (evidence/2026-11-25/textgen-cpu/race.py) on a GPU: text-generation-webui's
llama.cpp loader in front of the CUDA llama-server against that llama-server bare, same binary, same
GGUF, every layer on the GPU, the rig's GPU telemetry on (``--gpu 0``).

    RIG_TEXTGEN_PYTHON=python3 RIG_TEXTGEN_SOURCE=DIR RIG_LLAMA_SERVER=CUDA_BIN \\
      python3 evidence/2026-11-25/textgen-gpu/race_gpu.py OUT --model GGUF [--rounds 2] [--users 1,8,32]

The CPU script runs as it is but for what a GPU machine changes: the engines (text-generation-webui's
API and its llama-server) on cores 1-15 and the client on core 0, the client as ``python3 -m locust``
(no .venv there), ``--gpu-layers 999`` and the model given to the loader, 128 output tokens.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
cpu_race = runpy.run_path(str(REPO / "evidence/2026-11-25/textgen-cpu/race.py"), run_name="cpu_race")


def main() -> None:
    argv = sys.argv[1:]
    model = Path(argv[argv.index("--model") + 1]).resolve()
    del argv[argv.index("--model"):argv.index("--model") + 2]
    race = cpu_race["main"].__globals__  # the CPU script's module namespace, which its functions read
    race["ENGINE_CORE"], race["CLIENT_CORE"], race["MAX_TOKENS"] = os.environ.get("ENGINE_CORES", "1-15"), "0", 128
    race["PORT"] = int(os.environ.get("RACE_PORT", "5300"))
    race["LLAMA_SERVER"] = Path(os.environ["RIG_LLAMA_SERVER"])
    race["REPO"] = REPO  # its own REPO is one folder short since it moved under evidence/DATE/
    gpu_args = ["--gpu-layers", "999", "--model-dir", str(model.parent), "--model", model.name]
    textgen_command = race["textgen_command"]
    race["textgen_command"] = lambda port, extra: textgen_command(port, [*extra, *gpu_args])
    locust_command = race["locust_command"]

    def gpu_locust(*args: object) -> list[str]:
        cmd = locust_command(*args)
        at = next(i for i, arg in enumerate(cmd) if arg.endswith("/locust"))
        return [*cmd[:at], sys.executable, "-m", "locust", *cmd[at + 1:], "--gpu", "0"]

    race["locust_command"] = gpu_locust
    locust = race["locust"]

    def locust_said(*args: object) -> object:  # the CPU script keeps the client's output to itself
        result = locust(*args)
        if result.returncode != 0:
            print(f"locust exit {result.returncode}:", (result.stdout + result.stderr)[-1500:], flush=True)
        return result

    race["locust"] = locust_said
    sys.argv = [sys.argv[0], *argv]
    cpu_race["main"]()


if __name__ == "__main__":
    main()
