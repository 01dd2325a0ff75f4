"""Test files as a queue that several pytest processes share: `--file-queue DIR`.

Every process collects every file; the first to reach a file claims it (a file created in DIR
with O_EXCL) and runs its tests, the others pass it by. The processes stay busy until the
queue is empty, whatever each file takes, where a fixed split by file (every other file each)
left one process idle for a minute while the other ran (scripts/test.sh's fast tier).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["pytest_addoption", "pytest_runtest_protocol"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--file-queue", metavar="DIR", default=None,
                     help="run only the test files this process claims first in DIR (an empty "
                          "folder that other pytest processes of the same run are given too)")


def _claimed(config: pytest.Config, path: Path) -> bool:
    """Whether this process runs `path`'s tests: it claimed the file, now or before."""
    claims: dict[Path, bool] = config.stash.setdefault(_CLAIMS, {})
    if path not in claims:
        marker = Path(config.getoption("file_queue")) / str(path).replace(os.sep, "%")
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            claims[path] = True
        except FileExistsError:
            claims[path] = False
    return claims[path]


_CLAIMS = pytest.StashKey[dict[Path, bool]]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """Another process's file: done here without running (True stops pytest's own protocol)."""
    if item.config.getoption("file_queue") is None or _claimed(item.config, item.path):
        return None
    return True
