"""SGLang's offline bundle (servers/bundle/recipes.py, RECIPES["sglang"]): what its trims drop from
sglang-kernel 0.4.5 for the lent Hopper host, through pack's own wheel rewriting, and that each cut
says where in SGLang's sources it comes from."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

from servers.bundle.pack import restore_wheel
from servers.bundle.recipes import RECIPES

RECIPE = RECIPES["sglang"]
# sglang-kernel 0.4.5's compiled members and the modules that load them (its wheel, unzip -Z1)
KERNEL_MEMBERS = ("sgl_kernel/__init__.py", "sgl_kernel/load_utils.py", "sgl_kernel/flash_attn.py",
                  "sgl_kernel/flash_mla.py", "sgl_kernel/flash_ops.abi3.so",
                  "sgl_kernel/flashmla_ops.abi3.so", "sgl_kernel/infllm_ops.cpython-310-x86_64-linux-gnu.so",
                  "sgl_kernel/spatial_ops.abi3.so", "sgl_kernel/sm100/common_ops.abi3.so",
                  "sgl_kernel/sm90/common_ops.abi3.so")
NEVER_LOADED = {"sgl_kernel/flash_ops.abi3.so", "sgl_kernel/flashmla_ops.abi3.so",
                "sgl_kernel/infllm_ops.cpython-310-x86_64-linux-gnu.so"}


def _kernel_wheel(folder: Path) -> Path:
    wheel = folder / "sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as out:
        for member in KERNEL_MEMBERS:
            out.writestr(member, b"\0")
        out.writestr("sglang_kernel-0.4.5.dist-info/RECORD", "".join(f"{m},,\n" for m in KERNEL_MEMBERS))
    return wheel


def _kept(tmp_path: Path, compute_caps: tuple[str, ...]) -> set[str]:
    drops = [(t.members, t.why) for t in RECIPE.trims if t.drops(compute_caps)]
    target = tmp_path / f"trimmed-{'-'.join(compute_caps) or 'unknown'}.whl"
    restore_wheel(_kernel_wheel(tmp_path), target, drops)
    with zipfile.ZipFile(target) as wheel:
        return {n for n in wheel.namelist() if not n.endswith("RECORD")}


@pytest.mark.parametrize("compute_caps, also_dropped", [
    (("9.0",), {"sgl_kernel/sm100/common_ops.abi3.so"}),  # load_utils.py loads sm90/ on 9.0 alone
    (("10.0",), set()),
    ((), set())])  # GPUs unknown: both common ops stay
def test_the_trims_drop_fa3_flashmla_and_infllm_and_the_other_gpus_common_ops(
        tmp_path: Path, compute_caps: tuple[str, ...], also_dropped: set[str]) -> None:
    assert _kept(tmp_path, compute_caps) == set(KERNEL_MEMBERS) - NEVER_LOADED - also_dropped


def test_the_engine_is_started_so_that_the_trimmed_attention_and_sampler_are_never_used() -> None:
    args = dict(zip(RECIPE.engine_args[::2], RECIPE.engine_args[1::2]))
    assert args == {"--attention-backend": "triton", "--sampling-backend": "pytorch"}
    assert "flashinfer-python" not in RECIPE.left_out, "sglang/srt/layers/sampler.py imports it on CUDA"


def test_every_cut_cites_the_source_it_rests_on() -> None:
    whys = [*RECIPE.left_out.values(), *(t.why for t in RECIPE.trims)]
    assert all(re.search(r"[\w/]+\.py(:\d+)?", why) for why in whys), whys
