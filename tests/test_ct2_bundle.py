"""CTranslate2's bundle for the lent CUDA 13 hosts (servers/bundle/recipes.py): its wheel dlopens
CUDA 12's cuBLAS, which the bundle carries and puts first on TARGET/python's library path.

The lent host is evidence/2026-11-28/ct2-cuda13/host.json (`scripts/gpu_bundle.sh describe` there);
the install's library path is proven with a wheel made here, installed by this machine's pip.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rig_helpers import REPO
from servers.bundle.host import HostDescription, describe
from servers.bundle.install import InstallError, install
from servers.bundle.pack import pack
from servers.bundle.recipes import RECIPES, BundleRecipe
from servers.bundle.resolve import Locked, resolve

LENT_HOST = REPO / "evidence/2026-11-28/ct2-cuda13/host.json"
CUBLAS_LIB = "nvidia/cublas/lib"  # where nvidia-cublas-cu12 puts libcublas.so.12 and libcublasLt.so.12


def test_the_recipe_puts_cuda_12s_cublas_first_on_the_library_path_and_trims_what_is_never_loaded():
    recipe = RECIPES["ctranslate2"]
    assert recipe.requirements == ("ctranslate2==4.8.5", "nvidia-cublas-cu12==12.9.1.4")
    assert recipe.library_path == (CUBLAS_LIB,) and recipe.env == {}
    host = HostDescription.read(LENT_HOST)
    dropped = [t.members for t in recipe.trims if t.drops(host.compute_caps)]
    assert dropped and all(not re.match(m, f"{CUBLAS_LIB}/libcublasLt.so.12") for m in dropped)
    assert any(re.match(m, f"{CUBLAS_LIB}/libnvblas.so.12") for m in dropped)


@pytest.mark.engine  # not the fast tier: resolved from the index
def test_the_bundle_for_the_lent_host_carries_ctranslate2_and_cublas_12_and_nothing_it_has(tmp_path: Path):
    host = HostDescription.read(LENT_HOST)
    assert (host.python, host.glibc, host.packages["nvidia-cublas"]) == ("3.12", "2.39", "13.1.0.3")
    locked = {l.name: l.version for l in resolve(RECIPES["ctranslate2"], host, tmp_path / "resolve")}
    # numpy and PyYAML, its other requirements, are the host's own
    assert locked == {"ctranslate2": "4.8.5", "nvidia-cublas-cu12": "12.9.1.4"}


def _wheel(folder: Path, name: str, files: dict[str, bytes]) -> Path:
    """A minimal pure wheel holding ``files``, with the RECORD pip checks."""
    dist = f"{name}-1.0.dist-info"
    files = {**files,
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}

    def digest(data: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = "".join(f"{path},sha256={digest(data)},{len(data)}\n" for path, data in files.items())
    record += f"{dist}/RECORD,,\n"
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, data in {**files, f"{dist}/RECORD": record.encode()}.items():
            wheel.writestr(member, data)
    return path


def _bundle_of(tmp_path: Path, library_path: tuple[str, ...]) -> Path:
    wheel = _wheel(tmp_path, "demo_libs",
                   {"demo_libs/__init__.py": b"", "demo_libs/lib/libdemo.so.1": b"\x7fELF"})
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    recipe = BundleRecipe(name="demo", requirements=("demo_libs",), module="demo_libs",
                          library_path=library_path)
    locked = [Locked("demo-libs", "1.0", wheel.as_uri(), digest, wheel.stat().st_size)]
    pack(recipe, describe(sys.executable), locked, tmp_path / "bundle", tmp_path / "cache", part_mib=1)
    return tmp_path / "bundle"


def test_the_installed_python_puts_the_bundles_libraries_before_the_hosts(tmp_path: Path):
    result = install(_bundle_of(tmp_path, ("demo_libs/lib",)), tmp_path / "site", python=sys.executable)
    shown = "import os; print(os.environ['LD_LIBRARY_PATH'])"
    ours = f"{tmp_path}/site/demo_libs/lib"
    for host_path, expected in (("/usr/local/cuda/lib64", f"{ours}:/usr/local/cuda/lib64"), (None, ours)):
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        env.update({"LD_LIBRARY_PATH": host_path} if host_path else {})
        done = subprocess.run([result["python"], "-c", shown], env=env, capture_output=True, text=True)
        assert done.stdout.strip() == expected, done.stderr[-1500:]


def test_a_library_folder_the_wheels_did_not_bring_is_one_line(tmp_path: Path):
    with pytest.raises(InstallError,
                       match=r"^installed, but its library folder .*/site/demo_libs/no-such is not there$"):
        install(_bundle_of(tmp_path, ("demo_libs/no-such",)), tmp_path / "site", python=sys.executable)
