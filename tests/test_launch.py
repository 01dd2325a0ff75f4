"""One measured run, one way (loadtest/launch): the RunSpec's mapper, and the structure that keeps
it the only one: no other module builds Locust's argument list, the launch floor imports nothing
from the commands above it, and the migrated commands launch through `run`."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from loadtest.cli.run import checked_args
from loadtest.launch import RunSpec, command, find_row, run
from loadtest.launch.options import option_arguments

REPO = Path(__file__).resolve().parents[1]
LOADTEST = REPO / "loadtest"
FRONT_DOOR = ("loadtest.cli", "loadtest.race", "loadtest.sweep")
# Modules that launch a measured run: each through loadtest.launch's `run`, none by hand.
MIGRATED = ("loadtest/sweep/runner.py", "loadtest/cli/run.py", "loadtest/race/execute.py",
            "loadtest/sweep/rates.py", "loadtest/sweep/slo.py", "loadtest/inprocess/overhead.py",
            "loadtest/calibration/calibrate.py", "loadtest/bench/client.py",
            "loadtest/reconcile/side_by_side.py", "loadtest/race/latency.py")
# Modules that still assemble Locust's arguments themselves, until they move to a RunSpec.
NOT_YET: set[str] = set()


def _above(module: str) -> bool:
    return any(module == door or module.startswith(door + ".") for door in FRONT_DOOR)


def _modules() -> list[Path]:
    return sorted(LOADTEST.rglob("*.py"))


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _builds_locust_arguments(path: Path) -> bool:
    """Whether `path` calls locust_command or writes Locust's --users/--headless in a list."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "locust_command":
            return True
        if isinstance(node, ast.List) and any(
                isinstance(e, ast.Constant) and e.value in ("--users", "--headless")
                for e in node.elts):
            return True
    return False


def test_a_run_is_built_from_keywords_with_its_options_in_the_registrars_order():
    spec = RunSpec.of(engine="tgi", host="http://127.0.0.1:9", users=4, requests=8,
                      out=Path("out"), tag="t", flags="--max-batch 4", max_tokens=16,
                      keep_outputs=True, api=None, rate=2.5, only_summary=True)
    cmd = command(spec)
    assert cmd[cmd.index("--headless"):] == [
        "--headless", "--host", "http://127.0.0.1:9", "--users", "4", "--only-summary",
        "--engine", "tgi", "--requests", "8", "--max-tokens", "16", "--out", "out",
        "--flags=--max-batch 4", "--tag", "t", "--rate", "2.5", "--keep-outputs"]


def test_a_run_from_parsed_options_carries_only_what_was_changed():
    args, _ = checked_args(["--engine", "tgi", "--users", "2", "--temperature", "0.5"])
    spec = RunSpec.from_options(args, users=args.users)
    assert (spec.engine, spec.requests, dict(spec.options)) == ("tgi", None, {"temperature": "0.5"})
    assert spec.with_(requests=3, tag="x").rig_options() == {
        "engine": "tgi", "requests": 3, "tag": "x", "temperature": "0.5"}


def test_a_name_that_is_no_option_is_refused():
    with pytest.raises(ValueError, match="max_tokenz"):
        RunSpec.of(engine="tgi", max_tokenz=3)
    with pytest.raises(ValueError, match="nope"):
        option_arguments({"nope": 1})


def test_a_float_keeps_its_digits():
    assert option_arguments({"rate": 4.0, "temperature": 0.1234567891}) == [
        "--temperature", "0.1234567891", "--rate", "4"]


def test_the_row_is_found_by_its_run_id(tmp_path: Path):
    runs = tmp_path / "runs.csv"
    runs.write_text("run_id,tag\nold,a\nnew-1,b\nnew-2,c\n")
    assert find_row(runs, {"old"}, "new-1") == {"run_id": "new-1", "tag": "b"}
    assert find_row(runs, {"old"})["run_id"] == "new-2"
    assert find_row(runs, {"old", "new-1", "new-2"}) is None


def test_only_the_launch_floor_builds_locust_arguments():
    builders = {str(p.relative_to(REPO)) for p in _modules() if _builds_locust_arguments(p)}
    assert builders - NOT_YET == {"loadtest/launch/spec.py", "loadtest/launch/command.py"}
    assert NOT_YET <= builders, "a migrated module is still listed as not yet migrated"


def test_the_launch_floor_imports_nothing_from_the_commands():
    for path in (LOADTEST / "launch").glob("*.py"):
        upward = [m for m in _imports(path) if _above(m)]
        assert upward == [], f"{path.name} imports {upward}"
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, loadtest.launch; print(*sorted(sys.modules))"],
        capture_output=True, text=True, check=True, cwd=REPO).stdout.split()
    above = [m for m in loaded if _above(m)]
    assert above == []


@pytest.mark.parametrize("module", MIGRATED)
def test_a_migrated_command_launches_through_the_launcher(module: str):
    path = REPO / module
    assert "loadtest.launch" in _imports(path)
    assert not _builds_locust_arguments(path)
    assert "Popen" not in path.read_text() or module == "loadtest/cli/run.py"


def _stand_in(code: str, out: Path) -> RunSpec:
    """A run whose `locust` is a Python one-liner (Locust's arguments land in its sys.argv)."""
    return RunSpec.of(engine="tgi", out=out, locust=(sys.executable, "-c", code))


def test_a_run_past_its_deadline_is_stopped_with_its_group(tmp_path: Path):
    child = f"import time; time.sleep(60)  # {tmp_path.name}"  # the forked worker, marked
    code = (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); "
            "time.sleep(60)")
    launched = run(_stand_in(code, tmp_path), tmp_path / "run.log", timeout_s=2)
    assert (launched.exit_code, launched.row) == (-1, None)
    assert launched.error == "timed out after 2 s (Locust stopped)"
    left = subprocess.run(["pgrep", "-f", tmp_path.name], capture_output=True, text=True)
    assert left.stdout == ""


def test_a_runs_error_line_folder_and_row_come_from_its_own_output(tmp_path: Path):
    (tmp_path / "runs.csv").write_text("run_id,tag\nold,a\n")
    code = ("import sys; open({csv!r}, 'a').write('rid-2,b\\n'); "
            "print('error: this run failed', file=sys.stderr); print('x | results out/runs/rid-2')")
    log = tmp_path / "run.log"
    log.write_text("error: from an earlier run\n")
    spec = _stand_in(code.format(csv=str(tmp_path / "runs.csv")), tmp_path)
    launched = run(spec, log, timeout_s=30, append=True)
    assert (launched.exit_code, launched.error, launched.run_dir) == (0, "this run failed",
                                                                       "out/runs/rid-2")
    assert launched.row == {"run_id": "rid-2", "tag": "b"}
    assert log.read_text().splitlines()[:2] == ["error: from an earlier run",
                                                "+ " + " ".join(command(spec))]
