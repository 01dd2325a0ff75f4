"""tests/file_queue.py: pytest processes given one --file-queue run every test once between them,
the files that took longest at their last run first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

_FILE = '''
import pytest

@pytest.fixture(scope="module")
def module_setup():
    with open("setups.log", "a") as log:
        log.write("{name}\\n")

@pytest.mark.parametrize("case", range(3))
def test_case(module_setup, case):
    with open("ran.log", "a") as log:
        log.write(f"{name}:{{case}}\\n")
'''


def test_two_processes_run_each_file_once_with_its_module_fixtures(tmp_path: Path):
    names = [f"test_{n}" for n in range(6)]
    for name in names:
        (tmp_path / f"{name}.py").write_text(_FILE.format(name=name))
    queue = tmp_path / "queue"
    queue.mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "file_queue", "-p", "no:cacheprovider",
               "--file-queue", str(queue), *(f"{name}.py" for name in names)]
    processes = [subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [process.communicate(timeout=120)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs
    ran = (tmp_path / "ran.log").read_text().split()
    assert sorted(ran) == sorted(f"{name}:{case}" for name in names for case in range(3)), outputs
    assert sorted((tmp_path / "setups.log").read_text().split()) == names  # once per file
    assert len(os.listdir(queue)) == len(names)  # each file claimed once


def test_the_files_that_took_longest_last_time_go_first_and_new_ones_before_them(tmp_path: Path):
    names = [f"test_{n}" for n in range(4)]
    for name in names:
        (tmp_path / f"{name}.py").write_text(_FILE.format(name=name))
    (tmp_path / "queue").mkdir()
    seconds = tmp_path / "cache" / "v" / "file_queue" / "seconds"
    seconds.parent.mkdir(parents=True)
    seconds.write_text(json.dumps({"test_0.py": 1.0, "test_1.py": 9.0, "test_3.py": 5.0}))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "file_queue", "-o", "cache_dir=cache",
         "--file-queue", "queue", *(f"{name}.py" for name in names)], cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)}, capture_output=True,
        text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    ran = [line.split(":")[0] for line in (tmp_path / "ran.log").read_text().split()]
    assert list(dict.fromkeys(ran)) == ["test_2", "test_1", "test_3", "test_0"]
    assert set(json.loads(seconds.read_text())) == {f"{name}.py" for name in names}


def test_a_fresh_clone_orders_the_files_by_the_shipped_seconds_and_its_own_cache_wins(tmp_path: Path,
                                                                                    monkeypatch):
    """CI starts from a fresh clone with no cache: the seconds shipped in tests/file_seconds.json
    order its files; where this checkout's cache has a file's seconds, they win."""
    import file_queue

    shipped = tmp_path / "file_seconds.json"
    shipped.write_text(json.dumps({"tests/a.py": 1.0, "tests/b.py": 7.0, "tests/c.py": 3.0}))
    monkeypatch.setattr(file_queue, "FILE_SECONDS", shipped)

    class Cache:
        def __init__(self, seconds: dict[str, float]) -> None:
            self.seconds = seconds

        def get(self, key: str, default: object) -> object:
            return self.seconds

    class Config:
        def __init__(self, seconds: dict[str, float]) -> None:
            self.cache = Cache(seconds)

        def getoption(self, name: str) -> str:
            return "queue"

    def order(cached: dict[str, float]) -> list[str]:
        items = [SimpleNamespace(nodeid=f"tests/{name}.py::test_x") for name in "abcd"]
        file_queue.longest_first(Config(cached), items)
        return [item.nodeid.split("/")[1][0] for item in items]

    assert order({}) == ["d", "b", "c", "a"]  # d: no seconds anywhere, first
    assert order({"tests/a.py": 9.0}) == ["d", "a", "b", "c"]
