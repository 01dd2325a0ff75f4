"""Fixtures for the Compose tests: run the real `docker compose` binary on the repo's file."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
for _path in (ROOT, Path(__file__).resolve().parent):  # the rig's packages; docker_helpers.py
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))


@functools.cache  # asked once a session, not by each test (a process each)
def compose_available() -> str | None:
    """None if `docker compose` v2 runs here, else the reason it does not."""
    if shutil.which("docker") is None:
        return "no docker CLI on PATH (run: bash scripts/docker_setup.sh)"
    probe = subprocess.run(["docker", "compose", "version"], check=False, capture_output=True, text=True)
    if probe.returncode != 0:
        return "docker compose v2 is not installed (run: bash scripts/docker_setup.sh)"
    return None


def _clean_env(env: dict[str, str]) -> dict[str, str]:
    keep = {k: os.environ[k] for k in ("PATH", "HOME", "DOCKER_HOST", "DOCKER_CONFIG") if k in os.environ}
    return {**keep, **env}


@pytest.fixture
def require_compose() -> None:
    """Skip, with the reason, where `docker compose` v2 does not run."""
    reason = compose_available()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def clean_env() -> Callable[[dict[str, str]], dict[str, str]]:
    """Build a subprocess environment: PATH, HOME and Docker's own variables, plus the given ones."""
    return _clean_env


@pytest.fixture
def compose(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `docker compose ARGS` on docker-compose.yml with exactly ``env`` (no .env, no shell leftovers)."""
    reason = compose_available()
    if reason:
        pytest.skip(reason)
    env_file = tmp_path / "empty.env"
    env_file.write_text("")

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        cmd = ["docker", "compose", "--project-directory", str(ROOT), "-f", str(ROOT / "docker-compose.yml"),
               "--env-file", str(env_file), *args]
        return subprocess.run(cmd, check=False, capture_output=True, text=True, env=_clean_env(env or {}), cwd=ROOT)

    return run


# `docker compose config --format json` of each env already rendered in this pytest run (the
# same files, so the same answer): tests that read one env's project apart share one compose run.
_RENDERED: dict[tuple[tuple[str, str], ...], str] = {}


@pytest.fixture
def config(compose: Callable[..., subprocess.CompletedProcess[str]]) -> Callable[[dict[str, str]], dict[str, Any]]:
    """The rendered project (`docker compose config --format json`) for ``env``."""

    def render(env: dict[str, str]) -> dict[str, Any]:
        key = tuple(sorted(env.items()))
        if key not in _RENDERED:
            result = compose("config", "--format", "json", env=env)
            assert result.returncode == 0, result.stderr
            assert "variable is not set" not in result.stderr, result.stderr
            _RENDERED[key] = result.stdout
        return json.loads(_RENDERED[key])

    return render


@pytest.fixture(scope="module")
def docker_client() -> Any:
    """A Docker SDK client, or skip with the reason no Docker engine or Compose v2 answers."""
    reason = compose_available()
    if reason:
        pytest.skip(reason)
    import docker  # imported here, not at collection: it must not load ssl before Locust's gevent patch

    try:
        client = docker.from_env()
        client.ping()
    except (docker.errors.DockerException, OSError) as err:  # OSError: requests connection errors
        pytest.skip(f"no Docker engine answers ({type(err).__name__}); run: bash scripts/docker_setup.sh")
    return client

