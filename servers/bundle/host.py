"""What a GPU host has, as the bundle builder needs it: its Python, its C library, its GPUs'
compute capabilities and its installed packages.

``describe()`` reads them on the host itself (standard library only: the host may have nothing
else); ``HostDescription.read(path)`` reads them here, from that JSON or from a plain
``pip list --format=freeze`` file with the rest given as options.
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["HostDescription", "HostError", "describe", "parse_freeze"]


def canonicalize_name(name: str) -> str:
    """A package's name as indexes compare it (PEP 503), as packaging's function of that name
    does: ``describe`` runs on a host that may have nothing but the standard library."""
    return re.sub(r"[-_.]+", "-", name).lower()


class HostError(ValueError):
    """A host description that cannot be read; its message is the user's one line."""


_FREEZE_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)\s*$")
_LIST_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s+(\d[^\s]*)(\s.*)?$")


def parse_freeze(text: str, origin: str = "packages") -> dict[str, str]:
    """``name==version`` lines (``pip list --format=freeze``) or ``pip list``'s two columns.

    Editable or URL installs (``-e``, ``@``) and comments are skipped: the index has no such
    version to prefer. Anything else that is neither form is refused with its line number."""
    packages: dict[str, str] = {}
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "-e ", "Package ", "---")) or " @ " in line:
            continue
        match = _FREEZE_LINE.match(line) or _LIST_LINE.match(line)
        if match is None:
            raise HostError(f"{origin} line {number}: not 'name==version' nor pip list's "
                            f"'name version': {line[:80]!r}")
        packages[canonicalize_name(match.group(1))] = match.group(2).split("+")[0]
    if not packages:
        raise HostError(f"{origin}: no installed packages listed (pip list --format=freeze)")
    return packages


@dataclass(frozen=True)
class HostDescription:
    python: str                  # "3.12"
    glibc: str                   # "2.39"
    machine: str = "x86_64"
    compute_caps: tuple[str, ...] = ()   # one per GPU, "9.0"; empty: unknown, nothing trimmed
    packages: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"3\.\d{1,2}", self.python):
            raise HostError(f"host python {self.python!r}: give major.minor, e.g. 3.12")
        if not re.fullmatch(r"2\.\d{1,2}", self.glibc):
            raise HostError(f"host glibc {self.glibc!r}: give 2.N, e.g. 2.39 (ldd --version)")
        if self.machine not in ("x86_64", "aarch64"):
            raise HostError(f"host machine {self.machine!r}: x86_64 or aarch64")
        for cap in self.compute_caps:
            if not re.fullmatch(r"\d{1,2}\.\d", cap):
                raise HostError(f"GPU compute capability {cap!r}: give N.N, e.g. 9.0")

    @property
    def manylinux(self) -> str:
        """The newest manylinux tag the host's C library runs (uv's --python-platform)."""
        return f"{self.machine}-manylinux_{self.glibc.replace('.', '_')}"

    @property
    def python_tuple(self) -> tuple[int, int]:
        major, minor = self.python.split(".")
        return int(major), int(minor)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"

    @classmethod
    def read(cls, path: Path, **given: str | tuple[str, ...]) -> HostDescription:
        """A host from ``describe``'s JSON, or from a freeze file plus ``given`` (python,
        glibc, machine, compute_caps); a value given wins over the file's."""
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise HostError(f"cannot read host description {path}: {error}") from None
        if text.lstrip().startswith("{"):
            try:
                data = json.loads(text)
            except json.JSONDecodeError as error:
                raise HostError(f"{path}: not JSON ({error})") from None
            if not isinstance(data, dict) or not isinstance(data.get("packages"), dict):
                raise HostError(f"{path}: no 'packages' object (write it with "
                                "scripts/gpu_bundle.sh describe on the host)")
            fields = {k: data[k] for k in ("python", "glibc", "machine") if isinstance(data.get(k), str)}
            caps = data.get("compute_caps", ())
            fields["compute_caps"] = tuple(str(c) for c in caps) if isinstance(caps, list) else ()
            packages = {canonicalize_name(str(k)): str(v).split("+")[0] for k, v in data["packages"].items()}
        else:
            fields, packages = {}, parse_freeze(text, str(path))
        fields.update({k: v for k, v in given.items() if v})
        missing = [k for k in ("python", "glibc") if k not in fields]
        if missing:
            raise HostError(f"{path} is a package list: give the host's "
                            + " and ".join(f"--{k}" for k in missing))
        return cls(packages=packages, **fields)


def _glibc() -> str:
    name, version = platform.libc_ver()
    return version if name == "glibc" and version else "0.0"


def _compute_caps() -> tuple[str, ...]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(line.strip() for line in out.splitlines() if line.strip())


def describe(python: str = sys.executable) -> HostDescription:
    """This machine, as the bundle builder needs it (run on the GPU host)."""
    freeze = subprocess.run([python, "-m", "pip", "list", "--format=freeze"],
                            capture_output=True, text=True, check=True).stdout
    version = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return HostDescription(python=version, glibc=_glibc(), machine=platform.machine(),
                           compute_caps=_compute_caps(), packages=parse_freeze(freeze))
