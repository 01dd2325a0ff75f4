"""Compile exllamav3's CUDA extension (the module ``exllamav3_ext``) ahead of time, as a wheel, for
a GPU host that should import it rather than compile it on first import.

exllamav3/ext.py imports a prebuilt ``exllamav3_ext`` wherever one is importable and JIT-compiles
its sources only where none is. This builds that module from the sources the installed wheel
ships, with the flags and source list the wheel's own JIT build takes (exllamav3/util/cuda_flags.py,
loaded by path: importing the package would start the JIT build), and packs it as
``exllamav3_ext-VERSION-cpXY-cpXY-linux_x86_64.whl``. Its dist-info holds ``build.json``: the
torch build it links (the host must run the same), the CUDA version and the compute capabilities
it was compiled for; servers/bundle/prebuilt.py checks them against a host.
Run it with the interpreter of the target (its Python ABI and torch build), as
scripts/build_exl3_ext.sh does:

    python scripts/build_exl3_ext.py OUT_DIR

or, on a GPU host where an import of exllamav3 has compiled the module already (torch's JIT
build, into TORCH_EXTENSIONS_DIR/exllamav3_ext/), pack that module with no compile at all, with
the host's own interpreter (TARGET/python of the bundle), and carry the wheel back:

    python scripts/build_exl3_ext.py --from-module TARGET/torch_extensions/exllamav3_ext/exllamav3_ext.so OUT_DIR

TORCH_CUDA_ARCH_LIST (e.g. 9.0) names the GPUs to compile for; MAX_JOBS bounds the parallel compiles.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

EXTENSION = "exllamav3_ext"


def _package_dir() -> Path:
    spec = importlib.util.find_spec("exllamav3")  # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        sys.exit("error: exllamav3 is not installed in this interpreter")
    return Path(next(iter(spec.submodule_search_locations)))


def _cuda_flags(package: Path):
    spec = importlib.util.spec_from_file_location("_exl3_cuda_flags", package / "util" / "cuda_flags.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _missing_headers(out: Path, cuda_home: str) -> list[str]:
    """An include folder of links to the CUDA library headers (cuSPARSE, cuBLAS, ...) that torch's
    headers include and the toolkit at CUDA_HOME lacks (a compiler-only install), taken from the
    CUDA wheels torch came with (nvidia/cu13/include); [] where the toolkit has them all."""
    spec = importlib.util.find_spec("nvidia")
    wheels = [Path(p) / "cu13" / "include" for p in (spec.submodule_search_locations or [])] if spec else []
    toolkit = Path(cuda_home) / "include"
    folder = out / "cuda-headers"
    for wheel_include in (w for w in wheels if w.is_dir()):
        for header in wheel_include.iterdir():
            if not (toolkit / header.name).exists() and not (folder / header.name).exists():
                folder.mkdir(parents=True, exist_ok=True)
                (folder / header.name).symlink_to(header)
    return [str(folder)] if folder.is_dir() else []


def build(out: Path) -> Path:
    """The compiled module in ``out`` (objects kept under out/tmp: a second run relinks nothing)."""
    from setuptools import setup
    from torch.utils import cpp_extension

    package = _package_dir()
    sources_dir = package / EXTENSION
    flags = _cuda_flags(package)
    extension = cpp_extension.CUDAExtension(
        EXTENSION,
        flags.extension_sources(str(sources_dir)),
        include_dirs=[str(sources_dir), *_missing_headers(out, cpp_extension.CUDA_HOME)],
        extra_compile_args={"cxx": ["-Ofast"],  # as ext.py on Linux
                            "nvcc": flags.cuda_cflags(cuda_home=cpp_extension.CUDA_HOME)},
    )
    setup(name=EXTENSION, ext_modules=[extension],
          cmdclass={"build_ext": cpp_extension.BuildExtension},
          script_args=["build_ext", "--build-lib", str(out), "--build-temp", str(out / "tmp")])
    return out / f"{EXTENSION}{sysconfig.get_config_var('EXT_SUFFIX')}"


def check_module(path: Path) -> None:
    """Refuses (one line) a file that is not a compiled ``exllamav3_ext`` module."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        sys.exit(f"error: --from-module {path}: {exc.strerror or exc}")
    if not data.startswith(b"\x7fELF") or f"PyInit_{EXTENSION}".encode() not in data:
        sys.exit(f"error: --from-module {path} is not a compiled {EXTENSION} module (an ELF shared "
                 f"object with PyInit_{EXTENSION}): give TORCH_EXTENSIONS_DIR/{EXTENSION}/{EXTENSION}.so")


def pack_wheel(module: Path, out: Path) -> Path:
    """``module`` as a wheel of exllamav3's version, tagged for this interpreter, into ``out``
    (named as this interpreter names an extension module, whatever the file's own name)."""
    import torch

    version = importlib.metadata.version("exllamav3")
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    dist_info = f"{EXTENSION}-{version}.dist-info"
    facts = {"exllamav3": version, "torch": torch.__version__, "cuda": torch.version.cuda,
             "arch": os.environ["TORCH_CUDA_ARCH_LIST"], "python": sysconfig.get_python_version()}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / f"{EXTENSION}{sysconfig.get_config_var('EXT_SUFFIX')}").write_bytes(module.read_bytes())
        (root / dist_info).mkdir()
        (root / dist_info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {EXTENSION}\nVersion: {version}\n"
            f"Summary: exllamav3 {version}'s CUDA extension, compiled ahead of time "
            f"(scripts/build_exl3_ext.sh)\nRequires-Dist: torch=={torch.__version__.split('+')[0]}\n"
            f"Requires-Dist: exllamav3=={version}\n")
        (root / dist_info / "WHEEL").write_text(
            "Wheel-Version: 1.0\nGenerator: scripts/build_exl3_ext.py\nRoot-Is-Purelib: false\n"
            f"Tag: {tag}-{tag}-{sysconfig.get_platform().replace('-', '_')}\n")
        (root / dist_info / "build.json").write_text(json.dumps(facts, indent=1) + "\n")
        for old in out.glob(f"{EXTENSION}-*.whl"):
            old.unlink()
        subprocess.run([sys.executable, "-m", "wheel", "pack", "--dest-dir", str(out), scratch],
                       check=True)
    return next(out.glob(f"{EXTENSION}-{version}-{tag}-*.whl"))


def main(argv: list[str]) -> None:
    usage = "usage: build_exl3_ext.py [--from-module MODULE] OUT_DIR"
    source = None
    if argv[:1] == ["--from-module"]:
        if len(argv) != 3:
            sys.exit(f"error: {usage}")
        source, argv = Path(argv[1]), argv[2:]
        check_module(source)
    if len(argv) != 1 or argv[0].startswith("-"):
        sys.exit(f"error: {usage}")
    if not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        sys.exit("error: set TORCH_CUDA_ARCH_LIST to the target GPUs' compute capabilities (e.g. 9.0)"
                 + (": the ones the module was compiled for" if source else ""))
    _package_dir()  # the wheel takes exllamav3's version: refused here where it is not installed
    out = Path(argv[0]).resolve()
    started = time.monotonic()
    module = source or build(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    wheel = pack_wheel(module, out.parent)
    print(f"{'packed' if source else 'built'} {module} ({module.stat().st_size / 2**20:.1f} MiB) in "
          f"{time.monotonic() - started:.0f} s; wheel {wheel}")


if __name__ == "__main__":
    main(sys.argv[1:])
