"""What each engine's offline bundle holds: the pinned requirement, the packages that serving a
text model leaves out, and the parts of the engine's own wheel that the host's GPUs cannot use.

Every entry says why, and ``bundle.json`` carries the reasons to the host. What is left out is
opt-in there: a feature that needs it fails at the point of use, naming the module.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from dataclasses import dataclass, field, replace

from loadtest.toolkit.repo import REPO

__all__ = ["RECIPES", "BundleRecipe", "Prebuilt", "Trim", "rig_requirements"]


@dataclass(frozen=True)
class Trim:
    """Wheel members (a regular expression over their paths) dropped unless one of the host's
    GPUs has a compute capability matching ``used_on``; never dropped for a host whose GPUs
    are unknown. ``used_on`` of "" means never used by serving (an opt-in tool)."""

    members: str
    used_on: str
    why: str

    def drops(self, compute_caps: tuple[str, ...]) -> bool:
        if not self.used_on:
            return True
        return bool(compute_caps) and not any(re.match(self.used_on, cap) for cap in compute_caps)


@dataclass(frozen=True)
class Prebuilt:
    """A wheel no index has, compiled here for the host and carried beside the index's
    (servers/bundle/prebuilt.py checks that it fits the host). ``build``: the command that
    writes it into ``folder`` (relative to the checkout), with {python} and {arch} the host's
    Python and GPUs."""

    name: str
    folder: str
    build: str
    why: str


@dataclass(frozen=True)
class BundleRecipe:
    name: str                      # the engine's slug (servers/registry.py), or "rig"
    requirements: tuple[str, ...]  # what pip is asked for
    module: str                    # what `import` proves the install
    left_out: dict[str, str] = field(default_factory=dict)   # package -> why serving needs none
    trims: tuple[Trim, ...] = ()
    # what the engine needs set there ({TARGET}: the folder it is installed into)
    env: dict[str, str] = field(default_factory=dict)
    dist: str = ""                 # whose version the install reports (default: the first requirement's)
    # a repository command printing more requirements, one a line, where another script keeps them
    requirements_from: tuple[str, ...] = ()
    # console commands the install writes into TARGET/bin: name -> entry point ("module:function"),
    # run from the repository that installs the bundle, with the bundle's packages
    commands: dict[str, str] = field(default_factory=dict)
    # folders under {TARGET} that TARGET/python puts first on LD_LIBRARY_PATH: shared libraries
    # the engine loads by soname (dlopen) that the host has at another major version
    library_path: tuple[str, ...] = ()
    prebuilt: tuple[Prebuilt, ...] = ()
    # flags the engine must be started with for what the bundle leaves out or trims to stay
    # unused (the engine's local recipe passes them; bundle.json carries them to the host)
    engine_args: tuple[str, ...] = ()

    def expanded(self) -> BundleRecipe:
        """The recipe with ``requirements_from``'s lines added (run now, from the repository)."""
        if not self.requirements_from:
            return self
        printed = subprocess.run(self.requirements_from, cwd=REPO, capture_output=True, text=True)
        if printed.returncode != 0:
            last = (printed.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"{' '.join(self.requirements_from)} failed: {last}")
        return replace(self, requirements=(*self.requirements, *printed.stdout.split("\n")[:-1]))


# vLLM's kernels by GPU: FlashAttention 3 is Hopper's (sm90), FlashAttention 2 every other
# architecture's; the FMHA sources under third_party/fmha_sm100 compile for Blackwell alone.
_FLASH_ATTN_TRIMS = (
    Trim(r"[^/]+/vllm_flash_attn/_vllm_fa2_C\.abi3\.so$", r"(?!9\.)",
         "FlashAttention 2's ops: vLLM uses FlashAttention 3 on Hopper (compute capability 9.x)"),
    Trim(r"[^/]+/vllm_flash_attn/_vllm_fa3_C\.abi3\.so$", r"9\.",
         "FlashAttention 3's ops run on Hopper (9.x) alone"),
    Trim(r"[^/]+/third_party/fmha_sm100/", r"10\.", "Blackwell's (10.x) attention sources"),
)

# Kernel libraries a dense text model served with FlashAttention and the PyTorch sampler does
# not import; each is imported where its feature is used.
_KERNELS_LEFT_OUT = {
    "flashinfer-python": "FlashInfer kernels: attention is FlashAttention's, and the sampler is "
                         "PyTorch's where *_USE_FLASHINFER_SAMPLER=0",
    "flashinfer-cubin": "FlashInfer's prebuilt kernels (with flashinfer-python)",
    "tilelang": "TileLang kernels (sparse and MLA attention); pulls z3-solver",
    "nvidia-cutlass-dsl": "CuTe DSL kernels (quack, Blackwell paths); pulls the CUDA compiler wheels",
    "quack-kernels": "CuTe DSL kernels built on nvidia-cutlass-dsl",
}

RECIPES: dict[str, BundleRecipe] = {
    "vllm": BundleRecipe(
        name="vllm",
        requirements=("vllm==0.26.0",),
        module="vllm",
        left_out={
            **_KERNELS_LEFT_OUT,
            "tokenspeed-mla": "MLA attention (DeepSeek-style models); pulls a fork of Triton",
            "humming-kernels": "mixed-precision MoE kernels",
            "torchcodec": "video decoding for multimodal inputs",
            "pynvvideocodec": "NVIDIA video decoding for multimodal inputs",
        },
        trims=(*_FLASH_ATTN_TRIMS,
               Trim(r"vllm/vllm-rs$", "", "the Rust front end, started only where "
                                          "VLLM_RUST_FRONTEND_PATH asks for it")),
        env={"VLLM_USE_FLASHINFER_SAMPLER": "0"},
    ),
    "aphrodite": BundleRecipe(
        name="aphrodite",
        requirements=("aphrodite-engine==0.21.0",),
        module="aphrodite",
        left_out={**_KERNELS_LEFT_OUT,
                  "opencv-python-headless": "image preprocessing for multimodal inputs"},
        trims=_FLASH_ATTN_TRIMS,
        env={"APHRODITE_USE_FLASHINFER_SAMPLER": "0"},
    ),
}


def _project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def rig_requirements() -> tuple[str, ...]:
    """The rig's own dependencies (pyproject.toml) and the lean reference client's (bench)."""
    project = _project()
    return (*project["dependencies"], *project["optional-dependencies"]["bench"])


# The rig's code is the checkout that installs the bundle, not a copy: its models/, build/ and
# results/ are that checkout's (loadtest/toolkit/repo.py), as where the rig runs from a clone.
# The bundle carries its dependencies; the install writes its `rig` command (pyproject's scripts).
RECIPES["rig"] = BundleRecipe(name="rig", requirements=rig_requirements(), module="locust",
                              commands=dict(_project()["scripts"]))


# The host's own transformers where it has one (uv keeps the host's versions), with the extras its
# `transformers serve` imports (FastAPI, uvicorn, openai's types).
RECIPES["transformers"] = BundleRecipe(name="transformers", requirements=("transformers[serving]",),
                                       module="transformers.cli.transformers")

# SGLang: the newest release pinning the lent machines' torch 2.11.0 (0.5.11-0.5.17 do; 0.5.18 moved
# to 2.13.0), whose sglang-kernel 0.4.5 links CUDA 13 (evidence/2026-11-28/sglang-pins). What a dense
# model on one GPU never imports is left out, read from 0.5.17's and sglang-kernel 0.4.5's sources:
# sglang (a module-level import elsewhere would fail at `import`, so each was checked), sgl_kernel,
# flashinfer 0.6.15.post1. FlashInfer itself stays: sglang/srt/layers/sampler.py:30-34 imports
# flashinfer.sampling whenever CUDA is there, whatever the sampling backend.
RECIPES["sglang"] = BundleRecipe(
    name="sglang",
    requirements=("sglang==0.5.17",),
    module="sglang",
    left_out={
        "nvidia-cutlass-dsl": "CuTe DSL (with its CUDA 12 and 13 libraries): imported by sglang's CuTe "
                              "kernels alone (kernels/ops/attention/flash_attn/cute, linear/*_blackwell, "
                              "kimi_k3, diffusion); FlashInfer falls back without it "
                              "(flashinfer/norm/__init__.py:57-72, gemm/__init__.py:39-44)",
        "quack-kernels": "CuTe DSL kernels under FlashAttention 4 (kernels/ops/attention/flash_attn/cute/"
                         "flash_fwd_sm90.py:18 and its neighbours)",
        "flash-attn-4": "FlashAttention 4: --attention-backend fa4 "
                        "(kernels/ops/attention/flash_attention_v4.py:14, imported there)",
        "tokenspeed-mla": "MLA attention on Blackwell (srt/layers/attention/tokenspeed_mla_backend.py:66); "
                          "pulls a fork of Triton",
        "tilelang": "DeepSeek sparse attention's kernels (kernels/ops/attention/dsa/tilelang_kernel.py); "
                    "pulls z3-solver",
        "humming-kernels": "the humming quantization and its MoE runner "
                           "(srt/layers/quantization/humming.py:62-68, moe/moe_runner/humming.py:45-47); "
                           "pulls nvcc, NVVM and CCCL wheels",
        "nvidia-mathdx": "cuBLASDx headers for the JIT-built expert-balancing solver alone "
                         "(kernels/ops/lplb/cuda_solver.py:58, kernels/jit/utils/deps.py:90)",
        "numba": "imported by the Inkling image processor alone (srt/multimodal/inkling/"
                 "image_processing.py); pulls llvmlite",
        "helion": "Helion MoE kernels (kernels/ops/moe/inkling_moe.py, "
                  "moe_runner/triton_utils/helion_utils.py)",
        "torchcodec": "video decoding for multimodal inputs, imported in a try "
                      "(srt/utils/video_decoder.py:11)",
        "timm": "vision towers (srt/models/deepseek_vl2.py:204)",
        "kernels": "Hugging Face's kernel hub, for FlashAttention 3 from the network "
                   "(kernels/ops/attention/flash_attention_v3.py:46, in a try)",
        "nvidia-cudnn-frontend": "cuDNN's Python API, imported by FlashInfer in a try "
                                 "(flashinfer/gemm/gemm_base.py:85-89)",
        "modelscope": "ModelScope's hub, where SGLANG_USE_MODELSCOPE asks for it "
                      "(srt/utils/hf_transformers/common.py:75)",
    },
    trims=(
        Trim(r"sgl_kernel/sm100/", r"10\.", "Blackwell's (10.x) common ops: sgl_kernel/load_utils.py:60-68 "
             "loads sm90/common_ops on 9.0 and sm100/ on every other GPU"),
        Trim(r"sgl_kernel/flash_ops\.abi3\.so$", "",
             "FlashAttention 3's ops, imported by sgl_kernel/flash_attn.py:7-12 alone (not by "
             "sgl_kernel/__init__.py), which sglang imports only for --attention-backend fa3 "
             "(srt/layers/attention/flashattention_backend.py:254, "
             "kernels/ops/attention/flash_attention_v3.py:71) or multimodal attention "
             "(srt/layers/attention/vision.py:72); the engine runs with --attention-backend triton"),
        Trim(r"sgl_kernel/infllm_ops\.[^/]*\.so$", "",
             "InfLLM-V2 sparse attention, loaded when called (sgl_kernel/infllm_v2/attention.py:40); "
             "sglang 0.5.17 never calls it"),
        Trim(r"sgl_kernel/flashmla_ops\.abi3\.so$", "",
             "FlashMLA (DeepSeek MLA), imported in a try (sgl_kernel/flash_mla.py:6-11) that fails "
             "at use"),
    ),
    # The default on Hopper is FlashAttention 3 (srt/server_args.py:5681-5688, flash_ops trimmed);
    # with FlashInfer installed the default sampler is FlashInfer's (srt/arg_groups/overrides.py:
    # 1924-1930), whose kernels compile on first use: PyTorch's samples instead.
    engine_args=("--attention-backend", "triton", "--sampling-backend", "pytorch"),
)

# ExLlamaV3: a pure-Python wheel whose CUDA extension torch would compile on first import (258 s
# with MAX_JOBS=16 on an H200); the bundle carries it compiled here instead (exllamav3 imports a
# prebuilt `exllamav3_ext` before it compiles anything). TORCH_EXTENSIONS_DIR, CUDA_HOME and
# MAX_JOBS serve the JIT build of an install without it.
RECIPES["exllamav3"] = BundleRecipe(
    name="exllamav3",
    # tabulate: imported by its memory report (exllamav3/util/memory.py), not declared
    requirements=("exllamav3==1.6.5", "tabulate"),
    module="exllamav3",
    env={"TORCH_EXTENSIONS_DIR": "{TARGET}/torch_extensions", "CUDA_HOME": "/usr/local/cuda",
         "MAX_JOBS": "16"},
    prebuilt=(Prebuilt("exllamav3_ext", "build/exl3",
                       "scripts/build_exl3_ext.sh --python python{python} --arch '{arch}'",
                       "exllamav3's CUDA extension, compiled ahead of time: imported, never "
                       "compiled on the host"),),
)

# text-generation-webui's API (its llama.cpp loader starts the rig's CUDA llama-server): the
# requirements scripts/install_textgen.sh installs locally, for `install_textgen.sh --into` there.
RECIPES["textgen"] = BundleRecipe(name="textgen", requirements=(), module="fastapi", dist="fastapi",
                                  requirements_from=("scripts/install_textgen.sh", "--requirements"))

# CTranslate2: its wheel links CUDA's runtime statically and, at its first GPU call, dlopens CUDA
# 12's cuBLAS by soname (libcublas.so.12, which needs libcublasLt.so.12; nothing else of CUDA but
# the driver's libcuda.so.1: readelf and the sonames in the wheel, evidence/2026-11-28/ct2-cuda13).
# The lent machines have CUDA 13's cuBLAS (libcublas.so.13): PyPI's CUDA 12 cuBLAS goes beside it,
# first on the library path of TARGET/python. 12.9 is the last CUDA 12 cuBLAS; any 12.x build runs
# on it. Its NVBLAS (a BLAS shim for CPU programs) is never loaded.
RECIPES["ctranslate2"] = BundleRecipe(
    name="ctranslate2",
    requirements=("ctranslate2==4.8.5", "nvidia-cublas-cu12==12.9.1.4"),
    module="ctranslate2",
    library_path=("nvidia/cublas/lib",),
    trims=(Trim(r"nvidia/cublas/lib/libnvblas\.so", "", "NVBLAS, a BLAS shim for CPU programs: "
                "CTranslate2 calls cuBLAS itself"),
           Trim(r"nvidia/cublas/include/", "", "C headers: nothing is compiled on the host")),
)
