"""Fetch the resolved wheels, trim the engine's, and pack them into parts of a chosen size with
``bundle.json`` beside them: what is in the bundle, what was left out or trimmed and why, and
each part's SHA-256, so the host can check every part before it unpacks any.

Wheels travel uncompressed inside one xz stream (a wheel's own deflate leaves xz little to find:
the compiled kernels shrink far more under xz alone).
"""

from __future__ import annotations

import json
import re
import shutil
import tarfile
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from packaging.utils import parse_wheel_filename

from servers.bundle.host import HostDescription
from servers.bundle.parts import MANIFEST, file_sha256, split
from servers.bundle.recipes import BundleRecipe
from servers.bundle.resolve import Locked

__all__ = ["PackError", "fetch", "pack", "restore_wheel"]

_CHUNK = 1 << 20


class PackError(RuntimeError):
    """A wheel that cannot be fetched or checked; the message is the user's one line."""


def fetch(wheel: Locked, cache: Path) -> Path:
    """The wheel in ``cache`` (fetched once), its SHA-256 checked against the lock's."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / wheel.filename
    if path.is_file() and file_sha256(path) == wheel.sha256:
        return path
    with tempfile.NamedTemporaryFile(dir=cache, prefix=f".{wheel.filename}.", delete=False) as out:
        partial = Path(out.name)  # a name of its own: two builds may fetch the same wheel
        try:
            with urllib.request.urlopen(wheel.url, timeout=120) as response:
                shutil.copyfileobj(response, out, _CHUNK)
        except OSError as error:
            partial.unlink(missing_ok=True)
            raise PackError(f"cannot fetch {wheel.filename}: {error}") from None
    if file_sha256(partial) != wheel.sha256:
        partial.unlink()
        raise PackError(f"{wheel.filename}: SHA-256 differs from the index's; not packed")
    partial.replace(path)
    return path


@dataclass(frozen=True)
class Dropped:
    member: str
    bytes: int
    why: str


def restore_wheel(source: Path, target: Path, drops: list[tuple[str, str]]) -> list[Dropped]:
    """``source`` rewritten to ``target`` uncompressed, less the members matching ``drops``
    ((regular expression, why) pairs); RECORD loses their lines, so pip installs it as is."""
    dropped: list[Dropped] = []
    with zipfile.ZipFile(source) as wheel, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as out:
        for info in wheel.infolist():
            why = next((w for pattern, w in drops if re.match(pattern, info.filename)), None)
            if why is not None:
                dropped.append(Dropped(info.filename, info.file_size, why))
        gone = {d.member for d in dropped}
        for info in wheel.infolist():
            if info.filename in gone:
                continue
            data = wheel.read(info)
            if info.filename.endswith(".dist-info/RECORD") and gone:
                lines = data.decode("utf-8").splitlines(keepends=True)
                data = "".join(l for l in lines if l.split(",", 1)[0] not in gone).encode("utf-8")
            info.compress_type = zipfile.ZIP_STORED
            out.writestr(info, data)
    return dropped


def pack(recipe: BundleRecipe, host: HostDescription, locked: list[Locked], out: Path,
         cache: Path, part_mib: float, xz_preset: int = 3,
         prebuilt: tuple[Path, ...] = (), compiles_on_import: tuple[str, ...] = ()
         ) -> dict[str, object]:
    """Writes the parts and ``bundle.json`` into ``out`` (emptied of an earlier bundle of the
    same name first) and returns the manifest. ``prebuilt``: wheels compiled here for the host
    (servers/bundle/prebuilt.py), carried as they are; ``compiles_on_import``: the recipe's
    prebuilt modules left out, which the engine's first import compiles on the host instead."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"{recipe.name}.tar.xz.*"):
        old.unlink()
    drops = [(t.members, t.why) for t in recipe.trims if t.drops(host.compute_caps)]
    started = time.monotonic()
    wheels, entries, trimmed = [], [], []
    with tempfile.TemporaryDirectory(prefix="rig-bundle-", dir=out) as scratch:
        stage = Path(scratch)
        for lock in locked:
            source = fetch(lock, cache)
            target = stage / lock.filename
            gone = restore_wheel(source, target, drops)
            for why in dict.fromkeys(d.why for d in gone):  # one entry a rule, not a file
                same = [d for d in gone if d.why == why]
                trimmed.append({"wheel": lock.filename, "why": why, "files": len(same),
                                "bytes": sum(d.bytes for d in same),
                                "largest": max(same, key=lambda d: d.bytes).member})
            wheels.append(target)
            entries.append({"name": lock.name, "version": lock.version, "file": lock.filename,
                            "index_sha256": lock.sha256, "bytes": target.stat().st_size})
        for source in prebuilt:
            name, version, _, _ = parse_wheel_filename(source.name)
            target = stage / source.name
            restore_wheel(source, target, [])
            wheels.append(target)
            entries.append({"name": str(name), "version": str(version), "file": source.name,
                            "prebuilt_sha256": file_sha256(source), "bytes": target.stat().st_size})
        archive = stage / "bundle.tar.xz"
        with tarfile.open(archive, "w:xz", preset=xz_preset) as tar:
            for wheel in wheels:
                tar.add(wheel, arcname=f"wheels/{wheel.name}")
        parts = split(archive, out, recipe.name, int(part_mib * 1024 * 1024))
        archive_sha = file_sha256(archive)
    manifest: dict[str, object] = {
        "name": recipe.name, "module": recipe.module, "dist": recipe.dist,
        "requirements": list(recipe.requirements),
        "env": recipe.env, "library_path": list(recipe.library_path), "commands": recipe.commands,
        "engine_args": list(recipe.engine_args),
        "host": {k: v for k, v in asdict(host).items() if k != "packages"},
        "wheels": entries, "left_out": recipe.left_out, "trimmed": trimmed,
        "compiles_on_import": list(compiles_on_import), "parts": parts, "archive_sha256": archive_sha,
        "unpacked_bytes": sum(e["bytes"] for e in entries),
        "packed_bytes": sum(int(p["bytes"]) for p in parts), "pack_s": round(time.monotonic() - started, 1),
    }
    final = out / MANIFEST.format(recipe.name)
    tmp = final.with_name(f".{final.name}.tmp")
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp.replace(final)
    return manifest
