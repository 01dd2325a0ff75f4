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

from loadtest.toolkit.repo import REPO
from servers.bundle.parts import MANIFEST, PartsReader, missing_or_wrong

__all__ = ["InstallError", "install", "read_manifest"]

# Requirements of the installed distributions that neither the target nor the host satisfies:
# run in the target's interpreter, standard library and packaging alone.
_UNMET = r"""
import json, sys
from importlib import metadata
try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name as canon
except ImportError:  # a host whose Python has pip alone
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name as canon
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


def check_parts(folder: Path, manifest: dict) -> list[Path]:
    problems = missing_or_wrong(folder, manifest["parts"])
    if problems:
        raise InstallError(f"{manifest['name']} bundle in {folder}: " + "; ".join(problems)
                           + f" (carry every part named in {MANIFEST.format(manifest['name'])} there)")
    return [folder / part["file"] for part in manifest["parts"]]


def _library_path(target: Path, folders: list[str]) -> str:
    """The export putting ``folders`` (under ``target``) before the host's own LD_LIBRARY_PATH."""
    missing = [f for f in folders if not (target / f).is_dir()]
    if missing:
        raise InstallError(f"installed, but its library folder {target / missing[0]} is not there")
    joined = shlex.quote(":".join(str(target / f) for f in folders))
    return f"export LD_LIBRARY_PATH={joined}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\n" if folders else ""


def _interpreter_script(target: Path, python: str, env: dict[str, str], libraries: list[str]) -> Path:
    exports = "".join(f"export {k}=${{{k}-{shlex.quote(v.replace('{TARGET}', str(target)))}}}\n"
                      for k, v in sorted(env.items())) + _library_path(target, libraries)
    script = target / "python"
    script.write_text(
        "#!/bin/sh\n# the host's Python with this bundle first on its path "
        "(servers/bundle/install.py)\n"
        f"export PYTHONPATH={shlex.quote(str(target))}${{PYTHONPATH:+:$PYTHONPATH}}\n"
        f"export PATH={shlex.quote(str(target / 'bin'))}:$PATH\n{exports}"
        f"exec {shlex.quote(python)} \"$@\"\n")
    script.chmod(0o755)
    return script


def _command_scripts(target: Path, interpreter: Path, source: Path, commands: dict[str, str]) -> list[Path]:
    """``TARGET/bin/NAME`` for each console command: its entry point run from the checkout
    ``source`` by ``interpreter`` (the bundle's packages first)."""
    scripts = []
    for name, entry in sorted(commands.items()):
        module, _, function = entry.partition(":")
        code = f"import sys; from {module} import {function}; sys.exit({function}())"
        script = target / "bin" / name
        script.parent.mkdir(exist_ok=True)
        script.write_text(
            f"#!/bin/sh\n# {name}: the code of {source} with the packages of {target} "
            "(servers/bundle/install.py)\n"
            f"export PYTHONPATH={shlex.quote(str(source))}${{PYTHONPATH:+:$PYTHONPATH}}\n"
            f"exec {shlex.quote(str(interpreter))} -c {shlex.quote(code)} \"$@\"\n")
        script.chmod(0o755)
        scripts.append(script)
    return scripts


def _prove_commands(scripts: list[Path], target: Path) -> None:
    for script in scripts:  # from elsewhere than the checkout: the script finds it itself
        done = subprocess.run([str(script), "--help"], cwd=target, capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise InstallError(f"installed, but `{script} --help` fails (exit {done.returncode}): {last}")


def install(folder: Path, target: Path, name: str | None = None,
            python: str = sys.executable, source: Path = REPO) -> dict:
    """Installs the bundle in ``folder`` into ``target``; returns what it did and found.
    ``source`` is the checkout whose code the bundle's console commands run."""
    manifest = read_manifest(folder, name)
    started = time.monotonic()
    parts = check_parts(folder, manifest)
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rig-bundle-", dir=target.parent) as scratch:
        with tarfile.open(fileobj=io.BufferedReader(PartsReader(parts), 1 << 20), mode="r|xz") as tar:
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
    interpreter = _interpreter_script(target, python, manifest.get("env", {}), manifest.get("library_path", []))
    commands = _command_scripts(target, interpreter, source, manifest.get("commands", {}))
    module = manifest["module"]
    dist = manifest.get("dist") or re.split(r"[\s;<>=!~\[]", manifest["requirements"][0], maxsplit=1)[0]
    compiles = manifest.get("compiles_on_import", [])
    # a module whose import would compile for minutes is found, not imported
    proof = (f"import importlib.util\nif importlib.util.find_spec({module!r}) is None: "
             f"raise ModuleNotFoundError({module!r})" if compiles else f"import {module}")
    probe = subprocess.run([str(interpreter), "-c", f"{proof}\nfrom importlib.metadata "
                            f"import version; print(version({dist!r}))"], capture_output=True, text=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        raise InstallError(f"installed, but `import {module}` fails: {last}")
    _prove_commands(commands, target)
    unmet = json.loads(subprocess.run(
        [str(interpreter), "-c", _UNMET, str(target), json.dumps(sorted(manifest["left_out"]))],
        capture_output=True, text=True, check=True).stdout)
    return {"name": manifest["name"], "module": module, "version": probe.stdout.strip(),
            "target": str(target), "python": str(interpreter), "wheels": len(wheels),
            "commands": [str(c) for c in commands], "compiles_on_import": compiles,
            "unpack_s": round(unpacked_s, 1), "install_s": round(time.monotonic() - started, 1),
            "unmet": [u for u in unmet if not u[3]], "left_out_unmet": [u for u in unmet if u[3]]}

