"""The offline bundle for a GPU host (servers/bundle/): read a host, resolve what it lacks, trim
what its GPUs cannot use, pack in parts, and install with pip and no index.

The end-to-end test makes a real bundle for a real host description (this machine's .venv, as
`describe` reads it) from the real index, and installs it with the host's pip; the engines'
own bundles are too large for CI and are proven on the GPU host (docs/gpus.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.inprocess.engines import ENGINES as INPROCESS
from rig_helpers import REPO
from servers.bundle.host import HostDescription, HostError, describe, parse_freeze
from servers.bundle.install import InstallError, install
from servers.bundle.pack import pack, restore_wheel
from servers.bundle.recipes import RECIPES, BundleRecipe
from servers.bundle.resolve import resolve
from servers.registry import SPECS

SCRIPT = REPO / "scripts/gpu_bundle.sh"


def _bundle(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def _refused(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]


def test_a_host_is_read_from_pip_freeze_or_pip_list():
    freeze = "torch==2.11.0+cu130\nNumPy==2.5.2\n-e git+https://x/y#egg=z\nfoo @ file:///x\n# c\n"
    assert parse_freeze(freeze) == {"torch": "2.11.0", "numpy": "2.5.2"}
    listed = "Package    Version\n---------- -------\nnvidia_ml_py 13.610.43\ntorch 2.11.0\n"
    assert parse_freeze(listed) == {"nvidia-ml-py": "13.610.43", "torch": "2.11.0"}
    with pytest.raises(HostError, match="line 2"):
        parse_freeze("torch==2.11.0\nthis is not a package line\n")


def test_a_freeze_file_needs_the_hosts_python_and_glibc(tmp_path: Path):
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("torch==2.11.0\n")
    _refused(_bundle("build", "vllm", "--host", str(freeze), "--plan"), "--python and --glibc")
    host = HostDescription.read(freeze, python="3.12", glibc="2.39", compute_caps=("9.0",))
    assert (host.manylinux, host.packages) == ("x86_64-manylinux_2_39", {"torch": "2.11.0"})


_ANY_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)


@settings(max_examples=200, deadline=None, database=None)
@given(field=st.sampled_from(["python", "glibc", "compute_caps", "machine"]), value=_ANY_TEXT)
def test_any_host_value_is_taken_or_refused_in_one_line(field: str, value: str):
    given_value = (value,) if field == "compute_caps" else value
    try:
        HostDescription(**{"python": "3.12", "glibc": "2.39", field: given_value})
    except HostError as error:
        assert "\n" not in str(error) and field.split("_")[0] in str(error).lower()


@settings(max_examples=200, deadline=None, database=None)
@given(value=_ANY_TEXT)
def test_any_part_size_is_taken_or_refused_in_one_line(value: str):
    from servers.bundle.__main__ import _part_mib
    try:
        assert 1 <= _part_mib(value) <= 4096
    except argparse.ArgumentTypeError as error:
        assert "\n" not in str(error) and "part size" in str(error)


@pytest.mark.parametrize("option, value, message", [
    ("--python", "3", "host python '3'"), ("--glibc", "2.x", "host glibc '2.x'"),
    ("--compute-cap", "sm90", "compute capability 'sm90'"), ("--part-mib", "0", "part size '0'"),
    ("--part-mib", "nan", "part size 'nan'")])
def test_a_bad_build_option_is_one_error_line(tmp_path: Path, option: str, value: str, message: str):
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("torch==2.11.0\n")
    good = {"--python": "3.12", "--glibc": "2.39", option: value}
    _refused(_bundle("build", "vllm", "--host", str(freeze), *[f"{k}={v}" for k, v in good.items()],
                     "--plan"), message)


def test_what_a_gpu_cannot_use_is_trimmed_and_nothing_for_unknown_gpus():
    trims = {t.members: t for t in RECIPES["vllm"].trims}
    fa2 = next(t for m, t in trims.items() if "fa2" in m)
    fa3 = next(t for m, t in trims.items() if "fa3" in m)
    rust = next(t for m, t in trims.items() if "vllm-rs" in m)
    assert fa2.drops(("9.0",)) and not fa2.drops(("8.0",)) and not fa2.drops(("9.0", "8.6"))
    assert fa3.drops(("8.9",)) and not fa3.drops(("9.0",))
    assert not fa2.drops(()) and not fa3.drops(()) and rust.drops(())
    # exllamav3: the library textgen's ExLlamav3 loader imports; ctranslate2: an in-process engine
    assert set(RECIPES) - {"rig", "exllamav3"} <= set(SPECS) | set(INPROCESS), "a bundle is named for an engine"


def test_textgens_bundle_asks_for_what_install_textgen_installs():
    from servers.textgen import SOURCE

    if not (SOURCE / "server.py").exists() and not list((REPO.parent / "shared/vendor").glob("text-gen*.tar.gz")):
        pytest.skip("no text-generation-webui source here, nor its tarball in ../shared/vendor")
    printed = subprocess.run([str(REPO / "scripts/install_textgen.sh"), "--requirements"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.splitlines()
    recipe = RECIPES["textgen"].expanded()
    assert recipe.requirements == tuple(printed) and "fastapi==0.112.4" in printed
    assert not any(line.startswith("https://") for line in printed), "GitHub's wheels stay out"
    assert RECIPES["vllm"].expanded() is RECIPES["vllm"]


def _wheel(path: Path) -> Path:
    files = {"demo_pkg/__init__.py": b"VALUE = 42\n", "demo_pkg/kernels_sm80.so": b"\0" * 4096,
             "demo_pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n",
             "demo_pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{name},," + "\n" for name in files) + "demo_pkg-1.0.dist-info/RECORD,,\n"
    wheel = path / "demo_pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in files.items():
            out.writestr(name, data)
        out.writestr("demo_pkg-1.0.dist-info/RECORD", record)
    return wheel


def test_a_trimmed_wheel_installs_without_its_dropped_members(tmp_path: Path):
    source = _wheel(tmp_path)
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / source.name
    dropped = restore_wheel(source, target, [(r"demo_pkg/kernels_sm80\.so$", "Ampere's")])
    assert [(d.member, d.bytes) for d in dropped] == [("demo_pkg/kernels_sm80.so", 4096)]
    with zipfile.ZipFile(target) as wheel:
        assert {i.compress_type for i in wheel.infolist()} == {zipfile.ZIP_STORED}
        assert "kernels_sm80" not in wheel.read("demo_pkg-1.0.dist-info/RECORD").decode()
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    "--target", str(site), str(target)], check=True)
    assert (site / "demo_pkg/__init__.py").is_file() and not (site / "demo_pkg/kernels_sm80.so").exists()


def test_describe_reads_this_host(tmp_path: Path):
    result = _bundle("describe", "--python", sys.executable)
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads(result.stdout)
    assert data["python"] == "%d.%d" % sys.version_info[:2] and "pytest" in data["packages"]
    (tmp_path / "host.json").write_text(result.stdout)
    assert HostDescription.read(tmp_path / "host.json").packages == data["packages"]


def test_a_bundle_for_this_host_carries_only_what_it_lacks_and_installs_with_no_index(tmp_path: Path):
    """pytest-timeout needs pytest, which this host has: the bundle carries pytest-timeout
    alone, in parts of 4 KiB, and the host's pip installs it with no index."""
    host = describe(sys.executable)
    recipe = BundleRecipe(name="demo", requirements=("pytest-timeout==2.4.0",), module="pytest_timeout",
                          left_out={"nothing-at-all": "the left-out list is honoured"})
    locked = resolve(recipe, host, tmp_path / "resolve")
    assert [(l.name, l.version) for l in locked] == [("pytest-timeout", "2.4.0")]
    manifest = pack(recipe, host, locked, tmp_path / "bundle", tmp_path / "cache", part_mib=4 / 1024)
    parts = [p["file"] for p in manifest["parts"]]
    assert len(parts) >= 2 and parts[0] == "demo.tar.xz.000", parts
    result = install(tmp_path / "bundle", tmp_path / "site", python=sys.executable)
    assert (result["version"], result["wheels"], result["unmet"]) == ("2.4.0", 1, [])
    probe = subprocess.run([result["python"], "-c", "import pytest_timeout, pytest; print('ok')"],
                           capture_output=True, text=True)
    assert probe.stdout.strip() == "ok", probe.stderr[-1500:]

    (tmp_path / "bundle" / parts[1]).write_bytes(b"not the part")
    with pytest.raises(InstallError, match=f"{parts[1]} is 12 bytes"):
        install(tmp_path / "bundle", tmp_path / "site2", python=sys.executable)
    (tmp_path / "bundle" / parts[1]).unlink()
    refused = _bundle("install", str(tmp_path / "bundle"), "--target", str(tmp_path / "site3"))
    _refused(refused, f"{parts[1]} missing")


@pytest.mark.parametrize("args, message", [
    (["describe", "--python", "/nonexistent/python3"], "No such file or directory"),
    (["build", "vllm", "--host", "HOST", "--out", "/proc/no/such"], "/proc/no"),
    (["install", "FOLDER", "--target", "/proc/no/such"], "/proc/no")])
def test_a_path_that_cannot_be_used_is_one_error_line(tmp_path: Path, args: list[str], message: str):
    (tmp_path / "host.json").write_text(json.dumps({"python": "3.12", "glibc": "2.39", "packages": {"x": "1"}}))
    (tmp_path / "FOLDER").mkdir()
    (tmp_path / "FOLDER" / "demo.bundle.json").write_text(json.dumps({"name": "demo", "parts": []}))
    words = [{"HOST": str(tmp_path / "host.json"), "FOLDER": str(tmp_path / "FOLDER")}.get(a, a) for a in args]
    _refused(_bundle(*words), message)


def test_install_refuses_a_folder_without_a_bundle(tmp_path: Path):
    _refused(_bundle("install", str(tmp_path), "--target", str(tmp_path / "t")), "no NAME.bundle.json")


@pytest.mark.engine  # not the fast tier: a build, resolved from the index (about a minute)
def test_the_rig_bundle_installs_a_rig_command_that_runs_from_anywhere(tmp_path: Path):
    """A rig bundle for this machine, described without Locust: the bundle carries Locust, and
    its install writes TARGET/bin/rig, which runs this checkout's code from any folder."""
    host = describe(sys.executable)
    host = HostDescription(host.python, host.glibc, host.machine, host.compute_caps,
                           {k: v for k, v in host.packages.items() if k != "locust"})
    recipe = RECIPES["rig"]
    locked = resolve(recipe, host, tmp_path / "resolve")
    assert [l.name for l in locked] == ["locust"], locked
    manifest = pack(recipe, host, locked, tmp_path / "bundle", tmp_path / "cache", part_mib=1)
    assert manifest["commands"] == {"rig": "loadtest.cli.main:main"}
    done = _bundle("install", str(tmp_path / "bundle"), "--name", "rig", "--target", str(tmp_path / "rig"))
    assert done.returncode == 0, done.stderr[-2000:]
    rig = tmp_path / "rig" / "bin" / "rig"
    assert f"command: {rig}" in done.stdout, done.stdout
    helped = subprocess.run([str(rig), "--help"], cwd=tmp_path, capture_output=True, text=True)
    assert helped.returncode == 0 and "engine start" in helped.stdout, helped.stderr[-1500:]
    where = subprocess.run([str(tmp_path / "rig" / "python"), "-c", "import locust; print(locust.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert where.stdout.startswith(str(tmp_path / "rig")), where


def test_what_the_host_runs_before_an_install_needs_the_standard_library_alone():
    """describe, --help and install import nothing but the standard library (python -S: no
    site-packages), as on a host whose Python has nothing else."""
    for argv in (["--help"], ["describe"]):
        done = subprocess.run([sys.executable, "-S", "-m", "servers.bundle", *argv], cwd=REPO,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-1500:]
    imported = subprocess.run([sys.executable, "-S", "-c", "import servers.bundle.install"], cwd=REPO,
                              capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr[-1500:]


LENT_HOST = "torch==2.11.0\nnvidia-nccl-cu13==2.28.9\ntriton==3.6.0\n"  # as the lent machines' pip lists it


@pytest.mark.engine  # not the fast tier: resolved from the index
@pytest.mark.parametrize("name, carried, pins", [
    ("exllamav3", {"exllamav3": "1.6.5"}, ("llguidance", "marisa-trie", "pydantic", "tabulate")),
    ("sglang", {"sglang": "0.5.17", "sglang-kernel": "0.4.5"}, ("flashinfer-python",))])
def test_a_bundle_for_the_lent_hosts_keeps_their_torch(tmp_path: Path, name: str, carried: dict[str, str],
                                                       pins: tuple[str, ...]):
    """The plan for a host described by its pip list: the engine at its pinned version, the host's
    torch 2.11.0 kept (SGLang 0.5.17 pins it exactly), Hopper's GPUs named."""
    (tmp_path / "freeze.txt").write_text(LENT_HOST)
    host = HostDescription.read(tmp_path / "freeze.txt", python="3.12", glibc="2.39", compute_caps=("9.0",))
    locked = {l.name: l.version for l in resolve(RECIPES[name], host, tmp_path / "resolve")}
    assert carried.items() <= locked.items() and "torch" not in locked
    assert [p for p in pins if p not in locked] == []
