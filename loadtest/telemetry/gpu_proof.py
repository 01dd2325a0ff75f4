"""Check the NVML path on a real GPU: sample it through the run hook while a load runs on it.

    python3 -m loadtest.telemetry.gpu_proof OUT [--model models/tiny-llama]

Two windows, each sampled by start_telemetry(..., gpu="0") exactly as a run is:
  matmul    idle, then bf16 8192^3 matrix products on GPU 0 for a few seconds, then idle:
            memory, utilization, power and clocks must rise and fall with the load;
  generate  transformers greedy generation with a fixed token count (min = max new tokens),
            so energy per output token is computed from a known token count.
Needs torch (and transformers for the second window) on the machine; prints each summary.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

from loadtest.toolkit.args import RigParser
from loadtest.toolkit.types import positive_number, writable_folder
from loadtest.telemetry.hook import start_telemetry

__all__ = ["main"]

_IDLE_S = 1.5
_NO_ENGINE_URL = "http://127.0.0.1:9"  # nothing listens: the engine side is recorded absent


def main(argv: list[str] | None = None) -> int:
    parser = RigParser(prog="python3 -m loadtest.telemetry.gpu_proof")
    parser.add_argument("out", type=writable_folder)
    parser.add_argument("--model", default="models/tiny-llama")
    parser.add_argument("--load", choices=["matmul", "generate"], help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=positive_number, default=6.0)
    args = parser.parse_args(argv)
    if args.load == "matmul":
        return _matmul(args.seconds)
    if args.load == "generate":
        return _generate(args.model, args.out)
    for name, load in (("matmul", ["--seconds", str(args.seconds)]),
                       ("generate", ["--model", args.model])):
        summary = _window(args.out / name, name, load)
        print(f"== {name}\n{json.dumps(summary, indent=2)}", flush=True)
    return 0


def _window(run_dir: Path, load: str, extra: list[str]) -> dict[str, Any]:
    telemetry = start_telemetry(run_dir, "vllm", _NO_ENGINE_URL, "0", interval_s=0.2)
    time.sleep(_IDLE_S)
    started = time.time()
    cmd = [sys.executable, "-m", "loadtest.telemetry.gpu_proof", str(run_dir), "--load", load,
           *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    ended = time.time()
    print(done.stdout + done.stderr[-3000:], flush=True)
    time.sleep(_IDLE_S)
    tokens_path = run_dir / "tokens.json"
    tokens = json.loads(tokens_path.read_text())["output_tokens"] if tokens_path.exists() else None
    summary = telemetry.stop(tokens)
    summary.update(load_rc=done.returncode, load_start_s=started, load_end_s=ended,
                   output_tokens=tokens, power_integral_j=_power_integral(run_dir))
    (run_dir / "proof.json").write_text(json.dumps(summary, indent=2))
    return summary


def _power_integral(run_dir: Path) -> float | None:
    """The energy by integrating sampled power: a cross-check of NVML's energy counter."""
    rows = [json.loads(x) for x in (run_dir / "telemetry.jsonl").read_text().splitlines()]
    power = [(r["t"], r["power_w"]) for r in rows if r.get("source") == "gpu" and "power_w" in r]
    if len(power) < 2:
        return None
    return sum((p0 + p1) / 2 * (t1 - t0) for (t0, p0), (t1, p1) in pairwise(power))


def _matmul(seconds: float) -> int:
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ballast = torch.empty(16 * 2**30, dtype=torch.uint8, device="cuda")  # visible memory use
    products = 0
    deadline = time.monotonic() + seconds
    start = time.monotonic()
    while time.monotonic() < deadline:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
        products += 20
    elapsed = time.monotonic() - start
    print(f"matmul: {products} products in {elapsed:.1f} s = "
          f"{2 * 8192**3 * products / elapsed / 1e12:.0f} TFLOP/s on "
          f"{torch.cuda.get_device_name(0)}; ballast {ballast.numel() / 2**30:.0f} GiB")
    return 0


def _generate(model_path: str, run_dir: Path) -> int:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.bfloat16).to("cuda")
    prompts = torch.randint(2, 1000, (64, 16), device="cuda")
    new_tokens = 256
    start = time.monotonic()
    output = model.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=False,
                            max_new_tokens=new_tokens, min_new_tokens=new_tokens)
    torch.cuda.synchronize()
    generated = int((output.shape[1] - prompts.shape[1]) * output.shape[0])
    elapsed = time.monotonic() - start
    print(f"generate: {generated} output tokens in {elapsed:.2f} s "
          f"({generated / elapsed:.0f} tok/s)")
    (run_dir / "tokens.json").write_text(json.dumps({"output_tokens": generated}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
