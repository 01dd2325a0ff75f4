"""Random-weight LoRA adapters for a local Llama (models/tiny-llama), and the engine flags that
serve them: one base model, many adapters, as vLLM's `--enable-lora --lora-modules` takes them,
or llama.cpp's `--lora FILE.gguf` (converted with scripts/build_llamacpp.sh --lora-gguf).

    python -m servers.lora 16 models/tiny-lora            # writes lora0..lora15, prints the flags
    rig engine start vllm-cpu -- $(python -m servers.lora 16 models/tiny-lora)
    rig engine start llamacpp-cpu -- $(python -m servers.lora 16 models/tiny-lora --engine llamacpp)

No model hub and no peft: each adapter is PEFT's layout written here, `adapter_config.json`
(peft_type LORA, rank, alpha, target modules) and `adapter_model.safetensors` (safetensors'
documented layout: an 8-byte little-endian header length, a JSON header of dtype, shape and
byte offsets, then the raw tensors). Weights are seeded per adapter, so the same count gives the
same adapters everywhere; B is random too (PEFT starts it at zero, which would make every adapter
the base model's answers: the cost is the same, the outputs would not tell adapters apart).
The rig's workload spreads requests over the adapters by name (loadtest/workload/lora.py).
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np

from loadtest.toolkit.repo import REPO

__all__ = ["RANK", "TARGETS", "adapter_names", "build_adapters", "gguf_adapters", "llamacpp_flags",
           "lora_flags", "main"]

RANK = 8
ALPHA = 16
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")  # the attention projections, every layer
STD = 0.02
MAX_ADAPTERS = 256


def adapter_names(count: int) -> list[str]:
    """The names adapters are served under: lora0, lora1, ... (`--lora-adapters N`'s)."""
    return [f"lora{i}" for i in range(count)]


def _shapes(config: dict) -> dict[str, tuple[int, int]]:
    """Each target projection's (out, in) features, from the base model's config.json."""
    hidden = config["hidden_size"]
    head = config.get("head_dim") or hidden // config["num_attention_heads"]
    kv = config.get("num_key_value_heads", config["num_attention_heads"]) * head
    q = config["num_attention_heads"] * head
    return {"q_proj": (q, hidden), "k_proj": (kv, hidden), "v_proj": (kv, hidden),
            "o_proj": (hidden, q)}


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """float32 tensors in the safetensors layout (huggingface/safetensors' README)."""
    header: dict[str, object] = {}
    offset = 0
    for name, array in tensors.items():
        size = array.astype("<f4").nbytes
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with path.open("wb") as file:
        file.write(struct.pack("<Q", len(text)))
        file.write(text)
        for array in tensors.values():
            file.write(np.ascontiguousarray(array, dtype="<f4").tobytes())


def build_adapters(base: Path, out: Path, count: int, rank: int = RANK) -> list[Path]:
    """`count` adapters for the model in `base`, as out/lora0 ...; the same every time."""
    if not 1 <= count <= MAX_ADAPTERS:
        raise ValueError(f"the adapter count must be 1 to {MAX_ADAPTERS}, got {count}")
    config = json.loads((base / "config.json").read_text(encoding="utf-8"))
    shapes = _shapes(config)
    folders = []
    for index, name in enumerate(adapter_names(count)):
        rng = np.random.default_rng([index, rank])
        tensors = {}
        for layer in range(config["num_hidden_layers"]):
            for target in TARGETS:
                rows, cols = shapes[target]
                key = f"base_model.model.model.layers.{layer}.self_attn.{target}"
                tensors[f"{key}.lora_A.weight"] = rng.normal(0, STD, (rank, cols))
                tensors[f"{key}.lora_B.weight"] = rng.normal(0, STD, (rows, rank))
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        write_safetensors(folder / "adapter_model.safetensors", tensors)
        (folder / "adapter_config.json").write_text(json.dumps({
            "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": ALPHA,
            "lora_dropout": 0.0, "bias": "none", "target_modules": list(TARGETS),
            "fan_in_fan_out": False, "use_rslora": False, "use_dora": False,
            "modules_to_save": None, "base_model_name_or_path": str(base)}, indent=2) + "\n",
            encoding="utf-8")
        folders.append(folder)
    return folders


def lora_flags(folders: list[Path], rank: int = RANK) -> list[str]:
    """vLLM's flags serving these adapters, all at once in a batch (--max-loras)."""
    return ["--enable-lora", "--max-loras", str(len(folders)), "--max-lora-rank", str(rank),
            "--lora-modules", *(f"{folder.name}={folder.resolve()}" for folder in folders)]


def gguf_adapters(folders: list[Path]) -> list[Path]:
    """Each adapter as the GGUF file llama.cpp's --lora takes (FOLDER.gguf beside it), converted
    by the vendored converter (scripts/build_llamacpp.sh --lora-gguf); RuntimeError (one line)
    when the conversion fails."""
    script = REPO / "scripts" / "build_llamacpp.sh"
    files = []
    for folder in folders:
        out = folder.with_suffix(".gguf")
        done = subprocess.run(["bash", str(script), "--lora-gguf", str(folder), str(out)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"{folder.name}: the GGUF conversion failed ({why})")
        files.append(out)
    return files


def llamacpp_flags(files: list[Path]) -> list[str]:
    """llama-server's flags loading these adapters in order (a request's `lora` id is its place
    here), none applied unless a request asks (--lora-init-without-apply)."""
    return ["--lora-init-without-apply", *(part for file in files for part in ("--lora", str(file.resolve())))]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    engine = "vllm"
    if len(args) == 4 and args[2] == "--engine":
        engine, args = args[3], args[:2]
    if len(args) != 2 or not args[0].isdecimal() or engine not in ("vllm", "llamacpp"):
        print("error: usage: python -m servers.lora COUNT OUT_DIR [--engine vllm|llamacpp]  "
              "(adapters for models/tiny-llama)", file=sys.stderr)
        return 2
    from servers.vllm_cpu import TINY_MODEL

    try:
        folders = build_adapters(TINY_MODEL, Path(args[1]), int(args[0]))
        flags = lora_flags(folders) if engine == "vllm" else llamacpp_flags(gguf_adapters(folders))
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(" ".join(flags))
    return 0


if __name__ == "__main__":
    sys.exit(main())
