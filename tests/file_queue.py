"""Test files as a queue that several pytest processes share: `--file-queue DIR`.

Every process collects every file; the first to reach a file claims it (a file created in DIR
with O_EXCL) and runs its tests, the others pass it by. The processes stay busy until the
queue is empty, whatever each file takes, where a fixed split by file (every other file each)
left one process idle for a minute while the other ran (scripts/test.sh's fast tier).

The longest files go first, so that what is left at the end, while the other process may have
nothing left to take, is short: each file's seconds at its last run are kept in pytest's cache
(.pytest_cache); a fresh clone (CI) has none, and takes them from FILE_SECONDS, a run's cache
shipped beside this file (refresh it with `python tests/file_queue.py`); files without any (a new
file) go before them in the order given. The order changes only which process runs a file and
when, never what runs.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

__all__ = ["longest_first", "pytest_addoption", "pytest_collection_modifyitems",
           "pytest_runtest_makereport", "pytest_runtest_protocol", "pytest_sessionfinish"]


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


# {test file's path relative to the rootdir: its tests' seconds (setup, call and teardown)}
_SECONDS_KEY = "file_queue/seconds"
FILE_SECONDS = Path(__file__).with_name("file_seconds.json")  # a fast-tier run's, for fresh clones
_RAN = pytest.StashKey[Counter[str]]()


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def longest_first(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files that took longest at their last run first, each file's tests in their order."""
    cache = getattr(config, "cache", None)
    if config.getoption("file_queue") is None or cache is None:
        return
    shipped = json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.exists() else {}
    seconds: dict[str, float] = {**shipped, **cache.get(_SECONDS_KEY, {})}
    items.sort(key=lambda item: -seconds.get(_file(item.nodeid), math.inf))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """As a plugin of its own (`-p file_queue`); conftest.py, which has a hook of this name,
    calls longest_first from it instead of importing this one."""
    longest_first(config, items)


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """Each file's seconds in this process (the files it claimed: only they run here)."""
    if item.config.getoption("file_queue") is not None:
        item.config.stash.setdefault(_RAN, Counter())[_file(item.nodeid)] += call.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """This process's files' seconds into the cache, beside those the other process wrote."""
    config = session.config
    cache = getattr(config, "cache", None)
    ran = config.stash.get(_RAN, None)
    if cache is None or not ran:
        return
    # the processes end at about the same time: each merges into what the others wrote, in turn
    with open(cache.mkdir("file_queue_lock") / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cache.set(_SECONDS_KEY, {**cache.get(_SECONDS_KEY, {}),
                                 **{name: round(took, 2) for name, took in ran.items()}})


if __name__ == "__main__":  # FILE_SECONDS from this checkout's cache (after scripts/test.sh --fast)
    cached = Path(__file__).parents[1] / ".pytest_cache" / "v" / _SECONDS_KEY
    if not cached.exists():
        sys.exit(f"error: no {cached}: run scripts/test.sh --fast first")
    FILE_SECONDS.write_text(json.dumps(json.loads(cached.read_text()), indent=0, sort_keys=True) + "\n")
