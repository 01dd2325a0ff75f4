"""The pinned set a host lacks: uv resolves the recipe for the host's Python and C library,
preferring every version the host already has, and leaving out what the recipe leaves out.

Two resolutions, both uv's: the first writes a requirements file seeded with the host's own
versions (uv keeps a version already in its output file wherever the requirements allow); the
second turns those pins into a lock (``pylock.toml``) with each wheel's URL, size and hash. What
the bundle carries is that lock less what the host has at the same version.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from loadtest.toolkit.repo import REPO
from servers.bundle.host import HostDescription
from servers.bundle.recipes import BundleRecipe

__all__ = ["Locked", "ResolveError", "host_tags", "resolve"]


class ResolveError(RuntimeError):
    """No set of wheels serves this host; the message is the user's one line."""


@dataclass(frozen=True)
class Locked:
    """One wheel the bundle carries."""

    name: str
    version: str
    url: str
    sha256: str
    size: int

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]


def host_tags(host: HostDescription) -> list[Tag]:
    """The wheel tags the host's interpreter installs, best first (as its pip would rank them)."""
    minor = int(host.glibc.split(".")[1])
    platforms = [f"manylinux_2_{n}_{host.machine}" for n in range(minor, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    platforms += [f"{tag}_{host.machine}" for n, tag in legacy.items() if n <= minor]
    return [*cpython_tags(host.python_tuple, platforms=platforms),
            *compatible_tags(host.python_tuple, platforms=platforms)]


def _uv_compile() -> list[str]:
    """uv's compile command with the package sources pip is configured with (both set by
    scripts/gpu_bundle.sh)."""
    uv = os.environ.get("RIG_UV") or str(REPO / "build/uv/bin/uv")
    if not Path(uv).is_file():
        raise ResolveError(f"no uv at {uv}: run scripts/gpu_bundle.sh, which installs it")
    return [uv, "pip", "compile", "-q", *shlex.split(os.environ.get("RIG_UV_SOURCES", ""))]


def _compile(args: list[str], work: Path) -> None:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}
    done = subprocess.run([*_uv_compile(), *args], cwd=work, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        lines = [l for l in done.stderr.splitlines()
                 if l.strip() and not l.startswith(("warning", "  cause"))]
        raise ResolveError("uv found no set of wheels for this host: "
                           + " ".join(" ".join(lines).split())[:600])


def _pick_wheel(package: dict, ranked: dict[Tag, int]) -> dict | None:
    best, best_rank = None, len(ranked)
    for wheel in package.get("wheels", []):
        name = wheel["url"].rsplit("/", 1)[-1]
        try:
            _, _, _, tags = parse_wheel_filename(name)
        except InvalidWheelFilename:
            continue
        rank = min((ranked[t] for t in tags if t in ranked), default=len(ranked))
        if rank < best_rank:
            best, best_rank = wheel, rank
    return best


def resolve(recipe: BundleRecipe, host: HostDescription, work: Path) -> list[Locked]:
    """The wheels ``recipe`` needs on ``host`` that the host does not have, pinned."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "requirements.in").write_text("\n".join(recipe.requirements) + "\n")
    (work / "left-out.txt").write_text("".join(f"{name}\n" for name in recipe.left_out))
    # the output file seeded with the host's versions: uv keeps each where it can
    (work / "pins.txt").write_text("".join(f"{n}=={v}\n" for n, v in sorted(host.packages.items())))
    common = ["requirements.in", "--python-version", host.python, "--python-platform",
              host.manylinux, "--only-binary", ":all:", "--excludes", "left-out.txt",
              "--no-header", "--no-annotate"]
    _compile([*common, "-o", "pins.txt"], work)
    _compile([*common, "-c", "pins.txt", "--format", "pylock.toml", "-o", "pylock.bundle.toml"], work)
    lock = tomllib.loads((work / "pylock.bundle.toml").read_text(encoding="utf-8"))
    ranked = {tag: i for i, tag in enumerate(host_tags(host))}
    carried: list[Locked] = []
    for package in lock.get("packages", []):
        name, version = canonicalize_name(package["name"]), package["version"]
        if host.packages.get(name) == version:
            continue
        wheel = _pick_wheel(package, ranked)
        if wheel is None:
            raise ResolveError(f"{name}=={version} has no wheel for Python {host.python} on "
                               f"{host.manylinux} (the host cannot build from source offline)")
        carried.append(Locked(name, version, wheel["url"], wheel["hashes"]["sha256"],
                              int(wheel.get("size", 0))))
    return sorted(carried, key=lambda l: l.name)
