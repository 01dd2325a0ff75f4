"""CPU lists and the default split of a machine between engine and client (loadtest/cpus.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from rig_helpers import REPO

from loadtest.cpus import allowed_cpus, complete_layout, cpu_set, default_layout, format_cpus


@pytest.mark.parametrize("text, cores", [("1", {1}), ("0,2", {0, 2}), ("0-3", {0, 1, 2, 3}),
                                         ("1,3-5,7-8", {1, 3, 4, 5, 7, 8})])
def test_lists_parse_and_format_back(text: str, cores: set[int]):
    assert cpu_set(text) == cores
    assert format_cpus(cores) == text


def test_default_layout_gives_the_client_the_first_core_and_the_engine_the_rest():
    assert default_layout({0, 1}) == ("1", "0")
    assert default_layout(set(range(16))) == ("1-15", "0")
    assert default_layout({2, 3, 5}) == ("3,5", "2")
    assert default_layout({4}) == ("", "")  # one core: nothing to split


def test_a_client_of_several_processes_gets_as_many_cores():
    assert default_layout(set(range(64)), client_cores=4) == ("4-63", "0-3")
    assert default_layout({2, 3, 5, 7}, client_cores=2) == ("5,7", "2-3")
    assert default_layout({0, 1}, client_cores=2) == ("", "")  # the engine would have none


def test_one_side_given_the_other_gets_the_remaining_cores():
    cores = allowed_cpus()
    if len(cores) < 2:
        pytest.skip("needs two cores")
    first, last = min(cores), max(cores)
    assert complete_layout(str(last), "") == (str(last), format_cpus(cores - {last}))
    assert complete_layout("", str(first)) == (format_cpus(cores - {first}), str(first))


@pytest.mark.parametrize("engine, client, says", [
    ("0", "0", "overlap"), ("x", "", "CPU list"), ("1-0", "", "CPU list"),
    ("99999", "", "does not offer"),
    ("", "0-99999", "does not offer")])
def test_bad_layouts_are_refused(engine: str, client: str, says: str):
    with pytest.raises(ValueError, match=says):
        complete_layout(engine, client)


def test_the_command_prints_the_layout_or_one_error_line():
    ok = subprocess.run([sys.executable, "-m", "loadtest.cpus"], capture_output=True, text=True,
                        cwd=REPO, check=False)
    engine, client = default_layout()
    assert ok.returncode == 0 and ok.stdout.split() == [engine or "-", client or "-"]
    bad = subprocess.run([sys.executable, "-m", "loadtest.cpus", "--engine", "x"],
                         capture_output=True, text=True, cwd=REPO, check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and bad.stderr.count("\n") == 1
