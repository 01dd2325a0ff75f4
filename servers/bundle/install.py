"""The host's side of a bundle: check every part, unpack, install with pip alone (no index, no
dependency resolution: the bundle was resolved for this host), and prove it.

The engine's packages go into a folder of their own (``--target``), never into the host's
Python: two engines' bundles pin different versions of the same packages. ``TARGET/python`` is
the host's interpreter with that folder first on its path and the recipe's environment set, so
anything that takes an interpreter (``RIG_VLLM_PYTHON=TARGET/python``) runs the engine from it.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from servers.bundle.pack import MANIFEST, file_sha256

__all__ = ["InstallError", "install", "read_manifest"]

# Requirements of the installed distributions that neither the target nor the host satisfies:
# run in the target's interpreter, standard library and packaging alone.
_UNMET = r"""
import json, sys
from importlib import metadata
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as canon
target, left_out = sys.argv[1], set(json.loads(sys.argv[2]))
unmet = []
for dist in metadata.distributions(path=[target]):
    for text in dist.requires or ():
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            have = None
        if have is None or not req.specifier.contains(have, prereleases=True):
            unmet.append([dist.metadata["Name"], str(req), have, canon(req.name) in left_out])
print(json.dumps(unmet))
"""


class InstallError(RuntimeError):
    """A bundle that cannot be installed; the message is the user's one line."""


def read_manifest(folder: Path, name: str | None) -> dict:
    found = [folder / MANIFEST.format(name)] if name else sorted(folder.glob(MANIFEST.format("*")))
    if len(found) != 1 or not found[0].is_file():
        what = MANIFEST.format(name or "NAME")
        raise InstallError(f"{folder}: {'no' if not found or not found[0].is_file() else 'more than one'} "
                           f"{what} (give the bundle's folder{'' if name else ', and --name'})")
    try:
        return json.loads(found[0].read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InstallError(f"{found[0]}: unreadable ({error})") from None


class _Parts(io.RawIOBase):
    """The parts read back to back as one stream."""

    def __init__(self, paths: list[Path]) -> None:
        self._paths, self._file = list(paths), None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while self._paths or self._file:
            if self._file is None:
                self._file = self._paths.pop(0).open("rb")
            count = self._file.readinto(buffer)
            if count:
                return count
            self._file.close()
            self._file = None
        return 0


def check_parts(folder: Path, manifest: dict) -> list[Path]:
    paths, problems = [], []
    for part in manifest["parts"]:
        path = folder / part["file"]
        if not path.is_file():
            problems.append(f"{part['file']} missing")
        elif path.stat().st_size != part["bytes"]:
            problems.append(f"{part['file']} is {path.stat().st_size} bytes, not {part['bytes']}")
        elif file_sha256(path) != part["sha256"]:
            problems.append(f"{part['file']} differs (SHA-256)")
        paths.append(path)
    if problems:
        raise InstallError(f"{manifest['name']} bundle in {folder}: " + "; ".join(problems))
    return paths


def _interpreter_script(target: Path, python: str, env: dict[str, str]) -> Path:
    exports = "".join(f"export {k}=${{{k}-{shlex.quote(v.replace('{TARGET}', str(target)))}}}\n"
                      for k, v in sorted(env.items()))
    script = target / "python"
    script.write_text(
        "#!/bin/sh\n# the host's Python with this bundle first on its path "
        "(servers/bundle/install.py)\n"
        f"export PYTHONPATH={shlex.quote(str(target))}${{PYTHONPATH:+:$PYTHONPATH}}\n"
        f"export PATH={shlex.quote(str(target / 'bin'))}:$PATH\n{exports}"
        f"exec {shlex.quote(python)} \"$@\"\n")
    script.chmod(0o755)
    return script


def install(folder: Path, target: Path, name: str | None = None,
            python: str = sys.executable) -> dict:
    """Installs the bundle in ``folder`` into ``target``; returns what it did and found."""
    manifest = read_manifest(folder, name)
    started = time.monotonic()
    parts = check_parts(folder, manifest)
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rig-bundle-", dir=target.parent) as scratch:
        with tarfile.open(fileobj=io.BufferedReader(_Parts(parts), 1 << 20), mode="r|xz") as tar:
            tar.extractall(scratch, filter="data")
        wheels = sorted(str(p) for p in Path(scratch, "wheels").glob("*.whl"))
        if len(wheels) != len(manifest["wheels"]):
            raise InstallError(f"unpacked {len(wheels)} wheels, the manifest lists "
                               f"{len(manifest['wheels'])}")
        unpacked_s = time.monotonic() - started
        done = subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                               "--upgrade", "--target", str(target), *wheels],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            tail = (done.stdout or b"").decode(errors="replace").strip().splitlines()[-1:] or ["see its log"]
            raise InstallError(f"pip install --no-index failed (exit {done.returncode}): {tail[0]}")
    interpreter = _interpreter_script(target, python, manifest.get("env", {}))
    module = manifest["module"]
    dist = manifest.get("dist") or re.split(r"[\s;<>=!~\[]", manifest["requirements"][0], maxsplit=1)[0]
    probe = subprocess.run([str(interpreter), "-c", f"import {module}; from importlib.metadata "
                            f"import version; print(version({dist!r}))"], capture_output=True, text=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        raise InstallError(f"installed, but `import {module}` fails: {last}")
    unmet = json.loads(subprocess.run(
        [str(interpreter), "-c", _UNMET, str(target), json.dumps(sorted(manifest["left_out"]))],
        capture_output=True, text=True, check=True).stdout)
    return {"name": manifest["name"], "module": module, "version": probe.stdout.strip(),
            "target": str(target), "python": str(interpreter), "wheels": len(wheels),
            "unpack_s": round(unpacked_s, 1), "install_s": round(time.monotonic() - started, 1),
            "unmet": [u for u in unmet if not u[3]], "left_out_unmet": [u for u in unmet if u[3]]}

