"""A wheel compiled here for the host, which no index has (exllamav3's CUDA extension): found in
the folder its builder writes to and checked against the host before it is packed.

Such a wheel fits one host only: its interpreter (the wheel's Python tag), the packages whose
binary interface it links (``Requires-Dist: NAME==VERSION`` pins, torch's among them) and the
GPUs it was compiled for (``build.json`` in its dist-info: ``arch``, as TORCH_CUDA_ARCH_LIST
names them). A wheel that fits none of that is refused with the command that builds one.
"""

from __future__ import annotations

import email.parser
import json
import re
import zipfile
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import cpython_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from loadtest.toolkit.repo import REPO
from servers.bundle.host import HostDescription
from servers.bundle.recipes import Prebuilt
from servers.bundle.resolve import Locked, host_tags

__all__ = ["PrebuiltError", "PrebuiltWheel", "find_prebuilt", "gpus_not_covered"]


class PrebuiltError(RuntimeError):
    """No prebuilt wheel fits the host; the message is the user's one line."""


class PrebuiltWheel:
    """A prebuilt wheel's file and what its metadata says it was built against."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.name, self.version, _, self.tags = parse_wheel_filename(path.name)
            with zipfile.ZipFile(path) as wheel:
                dist_info = next(n.split("/")[0] for n in wheel.namelist()
                                 if n.split("/")[0].endswith(".dist-info"))
                metadata = email.parser.Parser().parsestr(wheel.read(f"{dist_info}/METADATA").decode())
                self.facts = json.loads(wheel.read(f"{dist_info}/build.json"))
            self.pins = {canonicalize_name(r.name): str(r.specifier)[2:]
                         for r in map(Requirement, metadata.get_all("Requires-Dist") or [])
                         if str(r.specifier).startswith("==")}
        except (InvalidWheelFilename, InvalidRequirement, zipfile.BadZipFile, StopIteration,
                KeyError, UnicodeDecodeError, ValueError, OSError) as error:
            raise PrebuiltError(f"{path}: not a prebuilt wheel with its build.json ({error})") from None


def gpus_not_covered(arch: str, compute_caps: tuple[str, ...]) -> list[str]:
    """The host's compute capabilities that ``arch`` (TORCH_CUDA_ARCH_LIST's form, "8.9;9.0+PTX")
    does not run on: a capability compiled for, or one at or above a +PTX entry of its major."""
    entries = [e.strip() for e in re.split(r"[;\s]+", arch) if e.strip()]
    exact = {e.removesuffix("+PTX") for e in entries}
    ptx = [tuple(map(int, e.removesuffix("+PTX").split("."))) for e in entries if e.endswith("+PTX")]
    uncovered = []
    for cap in compute_caps:
        major, minor = map(int, cap.split("."))
        if cap not in exact and not any(p <= (major, minor) for p in ptx):
            uncovered.append(cap)
    return uncovered


def find_prebuilt(prebuilt: Prebuilt, host: HostDescription, locked: list[Locked]) -> PrebuiltWheel:
    """The newest wheel of ``prebuilt`` in its folder that fits ``host`` with the ``locked``
    wheels beside the host's packages; PrebuiltError naming the build command otherwise."""
    folder = REPO / prebuilt.folder
    # a wheel built here carries the plain platform tag (linux_x86_64), which pip takes too
    ranked = {*host_tags(host), *cpython_tags(host.python_tuple, platforms=[f"linux_{host.machine}"])}
    wheels = [PrebuiltWheel(p) for p in sorted(folder.glob(f"{prebuilt.name}-*.whl"))]
    fitting = [w for w in wheels if w.tags & ranked]
    build = prebuilt.build.format(python=host.python, arch=";".join(sorted(set(host.compute_caps))))
    if not fitting:
        found = f" ({', '.join(w.path.name for w in wheels)} fit(s) another)" if wheels else ""
        raise PrebuiltError(f"no {prebuilt.name} wheel for Python {host.python} on "
                            f"{host.machine} in {folder}{found}: run {build} (or build the bundle "
                            "--without-prebuilt: the host compiles it)")
    wheel = max(fitting, key=lambda w: w.path.stat().st_mtime)
    versions = {**host.packages, **{l.name: l.version for l in locked}}
    for name, pinned in sorted(wheel.pins.items()):
        if versions.get(name) != pinned:
            raise PrebuiltError(f"{wheel.path.name} is built against {name} {pinned}; the host would "
                                f"run {versions.get(name) or 'none'}: run {build}")
    if not host.compute_caps:
        raise PrebuiltError(f"the host's GPUs are unknown, and {wheel.path.name} runs on compute "
                            f"capability {wheel.facts.get('arch')} alone: give --compute-cap")
    uncovered = gpus_not_covered(str(wheel.facts.get("arch", "")), host.compute_caps)
    if uncovered:
        raise PrebuiltError(f"{wheel.path.name} is compiled for compute capability "
                            f"{wheel.facts.get('arch')}, not the host's {', '.join(uncovered)}: run {build}")
    return wheel
