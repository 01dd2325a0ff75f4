"""First contact: what a new user runs on a fresh machine, before anything is installed.

The README's first command, `scripts/demo.sh`, checks its arguments with the machine's own
python3 before it installs anything, and every script answers `--help` there; a module-level
import of a package outside the standard library on that path once broke the demo on every fresh
machine while every other test (run from the rig's venv) stayed green. So these run the scripts
the way a fresh machine does: from a copy of the tree as git would check it out (no .venv, no
build/, no models/), with a `python3` on PATH that sees no site packages (`python3 -S`), and
check that nothing was installed or started.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loadtest.race.cli import main as race_main
from servers.local import LOCAL

REPO = Path(__file__).resolve().parents[1]
# scripts/venv.sh is sourced by the others, never run
SCRIPTS = sorted(p.name for p in (REPO / "scripts").glob("*.sh") if p.name != "venv.sh")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree as a fresh clone has it, and a bare python3 first on PATH."""
    root = tmp_path_factory.mktemp("fresh")
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            cwd=REPO, capture_output=True, check=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (root / "tree" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / "tree" / name)
    bare = root / "bin" / "python3"
    bare.parent.mkdir()
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(0o755)
    return root


@pytest.fixture(scope="module")
def guarded(fresh: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same, but were a test's arguments taken as good, the demo's install stops at once."""
    root = tmp_path_factory.mktemp("guarded")
    shutil.copytree(fresh, root, dirs_exist_ok=True, symlinks=True)
    (root / "tree" / "scripts" / "install.sh").write_text(
        "#!/bin/sh\necho 'error: the install started' >&2\nexit 99\n")
    return root


def _run(fresh: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHON")}
    env["PATH"] = f"{fresh / 'bin'}:/usr/bin:/bin"
    return subprocess.run(list(args), cwd=fresh / "tree", env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _nothing_installed(fresh: Path) -> None:
    made = [p.name for p in (fresh / "tree").iterdir()
            if p.name in (".venv", ".venv-vllm", ".venv-transformers", "build", "models", "results")]
    assert not made, f"installed or wrote before it was asked to: {made}"


def test_the_bare_python_has_no_site_packages(fresh: Path):
    """The premise: the python3 these tests put first on PATH cannot import the rig's packages."""
    result = _run(fresh, "python3", "-c", "import numpy")
    assert result.returncode != 0 and "No module named 'numpy'" in result.stderr


def test_the_demo_checks_good_arguments_before_it_installs(fresh: Path):
    result = _run(fresh, "scripts/demo.sh", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("engines: llamacpp-cpu, vllm-cpu, transformers"), result.stdout
    result = _run(fresh, "scripts/demo.sh", "--dry-run", "--engines", "llamacpp-cpu,vllm-cpu",
                  "1,8", "64", "--max-tokens", "32", "--workload", "synthetic", "--input-len", "128")
    assert result.returncode == 0, result.stderr
    assert "heats (users x requests): 1 user x 64, 8 users x 64" in result.stdout
    assert "run options: --max-tokens 32 --workload synthetic --input-len 128" in result.stdout
    _nothing_installed(fresh)


def _words(alphabet: str, size: int = 8) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=1, max_size=size)


def _not_users(text: str) -> bool:
    """Not USERS as the race reads them (whitespace around a count is allowed: "1 " is 1), nor
    "--", which ends the options and asks for nothing: the demo's defaults."""
    return text != "--" and not all(part.strip().isdigit() and int(part) > 0
                                    for part in text.split(","))


BAD_ARGUMENTS = st.one_of(
    _words("0123456789,-.ab ").filter(_not_users).map(lambda w: [w]),  # USERS
    st.tuples(st.just("8"), _words("-0.x ").filter(
        lambda w: w != "--" and (not w.isdigit() or int(w) <= 0))).map(list),
    st.tuples(st.just("--port"), st.one_of(st.integers(max_value=0), st.integers(min_value=65536))
              .map(str)).map(list),
    st.tuples(st.just("--engines"), _words("abcxyz-,").filter(
        lambda w: any(e not in LOCAL for e in w.split(",")))).map(list),
    _words("abcdefghijk-", 12).map(lambda w: [f"--zz{w}"]),  # an option nobody has
    st.tuples(st.sampled_from(["--max-tokens", "--rate"]),
              _words("-x.0 ", 4).filter(lambda w: not w.isdigit() or int(w) == 0)).map(list),
    st.tuples(st.just("--seed"), _words("-x. ", 4).filter(lambda w: not w.isdigit())).map(list),
    st.tuples(st.just("--max-tokens"), st.integers(max_value=0).map(str)).map(
        lambda p: [f"{p[0]}={p[1]}"]),
)


# Through the script on the bare python3 (the wiring, and what each kind of value imports on
# its way to the refusal), a process each: one value of each kind, and a few drawn; the values
# are walked in numbers in-process below.
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arguments=BAD_ARGUMENTS)
@example(arguments=["0"]).via("USERS")
@example(arguments=["8", "x"]).via("REQUESTS")
@example(arguments=["--port", "0"]).via("--port")
@example(arguments=["--engines", "x"]).via("--engines")
@example(arguments=["--zzq"]).via("an option nobody has")
@example(arguments=["--rate", "x"]).via("--max-tokens, --rate")
@example(arguments=["--seed", "x"]).via("--seed")
@example(arguments=["--max-tokens=0"]).via("--max-tokens=")
def test_the_demo_refuses_bad_arguments_in_one_line_before_it_installs(guarded: Path,
                                                                        arguments: list[str]):
    result = _run(guarded, "scripts/demo.sh", *arguments)
    assert result.returncode == 2, (arguments, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), (arguments, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr
    _nothing_installed(guarded)


@settings(max_examples=100, deadline=None)
@given(arguments=BAD_ARGUMENTS)
def test_the_demos_check_refuses_bad_arguments_in_one_line(arguments: list[str]):
    """The check demo.sh makes before it installs (`python -m loadtest.race --dry-run --answers 4
    ARGS`), in-process."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.chdir(REPO), contextlib.redirect_stdout(stdout), \
            contextlib.redirect_stderr(stderr):
        try:
            code = race_main(["--dry-run", "--answers", "4", *arguments])
        except SystemExit as exc:
            code = exc.code
    assert code == 2 and stdout.getvalue() == "", (arguments, stdout.getvalue())
    lines = stderr.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), (arguments, stderr.getvalue())


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_answers_help_before_anything_is_installed(fresh: Path, script: str):
    result = _run(fresh, f"scripts/{script}", "--help")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "usage" in result.stdout.lower() and "Traceback" not in result.stderr, result.stdout
    _nothing_installed(fresh)


def test_the_gpu_hosts_description_needs_only_the_standard_library(fresh: Path):
    """docs/gpus.md's first step runs on a GPU host that has only its own Python."""
    # the bundle's code on the bare python3 (PATH); the described interpreter lists its packages
    result = _run(fresh, "scripts/gpu_bundle.sh", "describe", "--python", sys.executable)
    assert result.returncode == 0, result.stderr
    assert '"python"' in result.stdout and '"glibc"' in result.stdout
    _nothing_installed(fresh)
