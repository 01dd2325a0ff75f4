"""A bundle's parts: one xz stream cut into files of a chosen size, each with its SHA-256 in
``NAME.bundle.json``, so they can travel one at a time under a size limit and be checked and
read back as one stream wherever they come together.

Standard library only: the host reads its parts before anything is installed there.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

__all__ = ["MANIFEST", "PartsReader", "file_sha256", "missing_or_wrong", "split"]

MANIFEST = "{}.bundle.json"  # by the bundle's name: vllm.bundle.json
_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def split(archive: Path, out: Path, name: str, part_bytes: int) -> list[dict[str, object]]:
    """``archive`` cut into ``out/NAME.tar.xz.000``, ``.001``, ...: each part's file, size and
    SHA-256, in order."""
    parts: list[dict[str, object]] = []
    with archive.open("rb") as source:
        index = 0
        while True:
            path = out / f"{name}.tar.xz.{index:03d}"
            digest, written = hashlib.sha256(), 0
            with path.open("wb") as part:
                while written < part_bytes and (block := source.read(min(_CHUNK, part_bytes - written))):
                    part.write(block)
                    digest.update(block)
                    written += len(block)
            if written == 0:
                path.unlink()
                break
            parts.append({"file": path.name, "bytes": written, "sha256": digest.hexdigest()})
            index += 1
    return parts


def missing_or_wrong(folder: Path, parts: list[dict]) -> list[str]:
    """What keeps the parts in ``folder`` from being the bundle: one phrase a part."""
    problems = []
    for part in parts:
        path = folder / part["file"]
        if not path.is_file():
            problems.append(f"{part['file']} missing")
        elif path.stat().st_size != part["bytes"]:
            problems.append(f"{part['file']} is {path.stat().st_size} bytes, not {part['bytes']}")
        elif file_sha256(path) != part["sha256"]:
            problems.append(f"{part['file']} differs (SHA-256)")
    return problems


class PartsReader(io.RawIOBase):
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
