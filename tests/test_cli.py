"""The `rig` front door (loadtest/cli/): every command's --help exits 0 and says what it does
with an example; every option of every command, walked by introspecting the commands' own
parsers and fed malformed values from generators, is refused with exactly one `error:` line and
exit 2, never a traceback. Parsed in-process (nothing starts: each command's check makes no
side effect); a subprocess per command only for a sample, to see the real exit and stderr."""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import itertools
import json
import math
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadtest.toolkit import types
from loadtest.cli.main import COMMANDS, Command, main
from loadtest.cpus import allowed_cpus
from loadtest.sweep.slo import width as slo_width

REPO = Path(__file__).resolve().parents[1]
PARSED = [c for c in COMMANDS if c.parser is not None]
BY_NAME = {c.name: c for c in COMMANDS}
# Positional values tried in turn until one parses (a sweep's ENGINE, a matrix file, a folder).
POSITIONAL_CANDIDATES = ("vllm-cpu", "vllm-offline",
                         str(REPO / "sweeps" / "vllm-cpu-max-num-seqs.yaml"), str(REPO), "list")


def rig(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """`rig ARGS` as a user runs it (the console script's module, so no reinstall is needed)."""
    return subprocess.run([sys.executable, "-m", "loadtest.cli.main", *args], capture_output=True,
                          text=True, timeout=timeout_s, cwd=REPO)


def check(command: Command, argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of parsing and checking `argv` in-process; 0 when accepted."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            command.check_argv(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def assert_one_error_line(code: int, err: str, *, names: str = "") -> None:
    assert "Traceback" not in err, err
    assert code == 2, (code, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert names in lines[0], (names, err)


# --- the options, found by introspection -----------------------------------------------------

@functools.cache
def required_positionals(command: Command) -> tuple[str, ...]:
    """The first positional words (from POSITIONAL_CANDIDATES) with which `command` accepts its
    defaults, whole checks included."""
    parser = command.build_parser()
    assert parser is not None
    count = sum(1 for a in parser._actions
                if not a.option_strings and a.nargs not in ("?", "*", argparse.SUPPRESS))
    # a list of words it checks for at least one itself (rig latency's ENGINE...): one more
    listed = any(not a.option_strings and a.nargs == "*" for a in parser._actions)
    for n in (count, count + 1) if listed else (count,):
        for words in itertools.product(POSITIONAL_CANDIDATES, repeat=n):
            extra = ["--dry-run"] if command.name == "race" else []  # its check plans the race
            if check(command, [*words, *extra])[0] == 0:
                return words
    raise AssertionError(f"rig {command.name}: no positional words it accepts")


def options(command: Command) -> list[argparse.Action]:
    parser = command.build_parser()
    assert parser is not None
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]


# --- malformed values, by what the option takes ----------------------------------------------

_WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
                 max_size=12).filter(lambda t: not _numeric(t) and "\x00" not in t)
_NOT_FINITE = st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e999"])
_NEGATIVE = st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False).map(repr)
_NEGATIVE_INT = st.integers(max_value=-1).map(str)
_HUGE_INT = st.one_of(st.integers(types.MAX_WHOLE + 1, 10**40).map(str), st.just("9" * 5000))
_FRACTION = st.floats(min_value=0.01, max_value=1e6, allow_nan=False).filter(
    lambda f: f != int(f)).map(repr)


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _gapped_list(good: st.SearchStrategy[str],
                 bad: st.SearchStrategy[str] = st.nothing()) -> st.SearchStrategy[str]:
    """Comma lists with a hole, a stray comma, a bad element (or one of `bad`) or an element
    twice."""
    items = st.lists(good, min_size=1, max_size=4)
    return st.one_of(
        items.map(lambda xs: ",".join(xs) + ","),
        items.map(lambda xs: "," + ",".join(xs)),
        items.map(lambda xs: ",".join([xs[0], "", *xs[1:]])),
        items.map(lambda xs: ",".join([*xs, xs[0]])),
        st.tuples(items, st.one_of(_WORDS.filter(lambda t: "," not in t), _NEGATIVE_INT,
                                   st.just("0"), _NOT_FINITE, bad))
          .map(lambda p: ",".join([*p[0], p[1]])),
    )


def _not_a_folder(tmp: Path) -> st.SearchStrategy[str]:
    """Paths that cannot be a writable folder: below a regular file, or empty."""
    return st.one_of(st.just(""), _WORDS.filter(lambda t: "/" not in t and t.strip(". ") == t
                                                 and t not in (".", ".."))
                     .map(lambda name: str(tmp / "a-file" / name)))


_ALL_CPUS = max(allowed_cpus())
STRATEGIES: dict[Callable, Callable[[Path], st.SearchStrategy[str]]] = {
    types.positive_int: lambda tmp: st.one_of(st.just("0"), _NEGATIVE_INT, _FRACTION, _WORDS,
                                              _NOT_FINITE, st.just(""), _HUGE_INT),
    types.non_negative_int: lambda tmp: st.one_of(_NEGATIVE_INT, _FRACTION, _WORDS, _NOT_FINITE,
                                                  _HUGE_INT),
    types.seed: lambda tmp: st.one_of(_NEGATIVE_INT, _FRACTION, _WORDS, _NOT_FINITE),
    types.positive_number: lambda tmp: st.one_of(st.just("0"), _NEGATIVE, _WORDS, _NOT_FINITE),
    types.non_negative_number: lambda tmp: st.one_of(_NEGATIVE, _WORDS, _NOT_FINITE),
    types.percent: lambda tmp: st.one_of(st.just("0"), _NEGATIVE, _WORDS, _NOT_FINITE,
                                         st.floats(min_value=100.001, max_value=1e12).map(repr)),
    types.positive_int_list: lambda tmp: _gapped_list(st.integers(1, 512).map(str), _HUGE_INT),
    types.positive_number_list: lambda tmp: _gapped_list(
        st.floats(min_value=0.5, max_value=64, allow_nan=False).map(lambda f: f"{f:g}")),
    types.port: lambda tmp: st.one_of(st.just("0"), st.integers(65536, 10**9).map(str),
                                      _NEGATIVE_INT, _WORDS, _FRACTION),
    types.url: lambda tmp: st.one_of(
        _WORDS, st.sampled_from(["http://", "https://", "ftp://host", "localhost:8000",
                                 "http://host:99999", "http://host:port", "http:// host",
                                 "127.0.0.1:8000", "//host:80", "file:///etc/passwd"])),
    types.cpu_list: lambda tmp: st.one_of(
        _WORDS, st.integers(_ALL_CPUS + 1, 4096).map(str), _NEGATIVE_INT,
        st.integers(1, 64).map(lambda n: f"{n}-0"), st.sampled_from(["0,,1", "0-", ",0", ""])),
    types.writable_folder: _not_a_folder,
    types.output_file: lambda tmp: st.one_of(st.just(str(tmp)), _not_a_folder(tmp)),
    types.existing_file: lambda tmp: st.one_of(st.just(str(tmp)), _not_a_folder(tmp)),
    types.duration: lambda tmp: st.one_of(st.just("0"), _NEGATIVE, _WORDS, st.just("5x")),
    slo_width: lambda tmp: st.one_of(
        st.sampled_from(["0", "0%", "%", "-5%", "nan%", "inf"]), _NEGATIVE,
        _WORDS.filter(lambda t: not _numeric(t.strip().removesuffix("%")))),
}
# Factory types are recognized by the function they make.
FACTORIES: dict[str, Callable[[Path], st.SearchStrategy[str]]] = {
    "number_in": lambda tmp: st.one_of(_WORDS, _NOT_FINITE,
                                       st.floats(min_value=1e9, max_value=1e12).map(repr),
                                       st.floats(max_value=-1e9, min_value=-1e12).map(repr)),
    "at_least": lambda tmp: st.one_of(_WORDS, _NOT_FINITE,
                                      st.floats(max_value=-1e9, min_value=-1e12).map(repr)),
    "one_of": lambda tmp: _WORDS.map(lambda t: f"no-such-{t}"),
}


def strategy_for(action: argparse.Action, tmp: Path) -> st.SearchStrategy[str] | None:
    """Malformed values for `action`, or None when any text is a value it may take."""
    if action.choices is not None:
        return _WORDS.filter(lambda t: t not in action.choices)
    if action.type in STRATEGIES:
        return STRATEGIES[action.type](tmp)
    factory = getattr(action.type, "__qualname__", "").partition(".<locals>")[0]
    if factory in FACTORIES:
        return FACTORIES[factory](tmp)
    if action.type is None and _numeric(str(action.default or "")):
        # an option left as text for the command to check (the locustfile's numbers)
        return st.one_of(_WORDS, _NOT_FINITE)
    return None


def _argv(action: argparse.Action, value: str, positionals: tuple[str, ...]) -> list[str]:
    if not action.option_strings:  # a positional: the bad value in its place
        return [value if i == 0 else p for i, p in enumerate(positionals)] or [value]
    return [*positionals, f"{action.option_strings[-1]}={value}"]  # "=": a value may start with -


def _cases(typed: bool) -> list:
    """(command, option) for every option of every command: those with malformed values
    (`typed`), or those taking any text."""
    nowhere = Path("/nonexistent")
    return [pytest.param(c.name, a.dest, id=f"{c.name}:{(a.option_strings or [a.dest])[-1]}")
            for c in PARSED for a in options(c)
            if a.nargs != 0 and (strategy_for(a, nowhere) is not None) == typed]


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli")
    (folder / "a-file").write_text("not a folder\n")
    return folder


@pytest.mark.parametrize("name, dest", _cases(typed=True))
def test_every_option_refuses_malformed_values_in_one_line(name: str, dest: str, tmp: Path,
                                                           monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp)  # where a default --out (results/) would be written
    command = BY_NAME[name]
    action = next(a for a in options(command) if a.dest == dest)
    positionals = required_positionals(command)

    @settings(max_examples=12, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(value=strategy_for(action, tmp))
    def refused(value: str) -> None:
        code, _, err = check(command, _argv(action, value, positionals))
        assert_one_error_line(code, err, names=(action.option_strings or [""])[-1])

    refused()
    assert sorted(p.name for p in tmp.iterdir()) == ["a-file"]  # nothing written


@pytest.mark.parametrize("name, dest", _cases(typed=False))
def test_free_text_options_never_end_in_a_traceback(name: str, dest: str, tmp: Path,
                                                    monkeypatch: pytest.MonkeyPatch):
    """Options that take any text (a tag, flags to record, a prompt set resolved later): any
    text, odd characters included, is accepted or refused in one line."""
    monkeypatch.chdir(tmp)
    command = BY_NAME[name]
    action = next(a for a in options(command) if a.dest == dest)
    positionals = required_positionals(command)

    @settings(max_examples=6, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(value=st.one_of(_WORDS, _NOT_FINITE, _NEGATIVE, st.just("")))
    def handled(value: str) -> None:
        code, _, err = check(command, _argv(action, value, positionals))
        assert "Traceback" not in err and code in (0, 2), (code, err)
        if code == 2:
            assert_one_error_line(code, err)

    handled()


@pytest.mark.parametrize("command", PARSED, ids=lambda c: c.name)
def test_every_command_parses_its_own_defaults(command: Command):
    """A typed option's text default is parsed by its type: a default it refuses would make
    the command unusable without that option."""
    required_positionals(command)  # raises when no words make it accept its defaults


def _help_cases() -> list:
    pending: dict[str, str] = {}
    return [pytest.param(c, id=c.name, marks=[pytest.mark.xfail(reason=pending[c.name])]
                         if c.name in pending else []) for c in COMMANDS]


@pytest.mark.parametrize("command", _help_cases())
def test_every_command_help_exits_0_and_shows_an_example(command: Command):
    if command.parser is None:  # a module that parses for itself: run it
        done = rig(*command.words, "--help")
        assert done.returncode == 0 and "usage" in done.stdout.lower(), done.stderr
        return
    code, out, err = check(command, ["--help"])
    assert code == 0 and not err, err
    assert out.startswith(f"usage: rig {command.name}"), out[:200]
    assert "example" in out, f"rig {command.name} --help shows no example"


def test_rig_help_lists_every_command():
    done = rig("--help")
    assert done.returncode == 0 and not done.stderr
    for command in COMMANDS:
        assert f"rig {command.name} " in done.stdout


# Through the real process: rig's dispatch, `rig run` (it execs Locust once its checks pass), a
# command that parses itself and the latency preset; the rest through the same main() in-process.
_REAL = ([], ["run", "--requests", "0"], ["engine", "start", "--port", "70000"],
         ["latency", "--requests", "0", "vllm-cpu"])


@pytest.mark.parametrize("args, message", [
    ([], "name a command"),
    (["nosuch"], "unknown command 'nosuch'"),
    (["sweep"], "rig sweep takes one of: threads"),
    (["sweep", "nosuch"], "rig sweep takes one of: threads"),
    (["run", "--requests", "0"], "--requests must be a positive integer"),
    (["run", "--duration", "10", "--warmup-s", "8", "--cooldown-s", "2"], "leaves no window"),
    (["run", "--stages", "/dev/null"], "--stages must be an existing file"),
    (["run", "--nosuch"], "unrecognized arguments: --nosuch"),
    (["sweep", "threads", "vllm-cpu", "--users", "1,,4"], "--users must be positive integers"),
    (["sweep", "rates", "vllm-cpu", "--rates", "nan"], "--rates must be numbers above 0"),
    (["sweep", "slo", "--width", "0%"], "--width must be req/s or a percent above 0"),
    (["sweep", "slo", "--max-repeats", "0"], "--max-repeats must be a positive integer"),
    (["sweep", "slo", "--attainment", "0"], "--attainment must be a percent"),
    (["sweep", "slo", "--trials", "4", "--max-repeats", "3"], "--max-repeats 3 is below --trials 4"),
    (["sweep", "slo", "--trials", "0"], "--trials must be a positive integer"),
    (["sweep", "slo", "--min-rate", "8", "--max-rate", "2"], "--max-rate 2 is below --min-rate 8"),
    (["sweep", "flags", str(REPO / "sweeps" / "llamacpp-cpu-parallel.yaml"), "--max-repeats", "3"],
     "--max-repeats goes with --until-known: add it"),
    (["sweep", "flags", str(REPO / "sweeps" / "llamacpp-cpu-parallel.yaml"), "--until-known",
      "--max-repeats", "0"], "--max-repeats must be a positive integer"),
    (["sweep", "threads", "vllm-cpu", "--until-known"], "a thread sweep has one"),
    (["report", "--slo-share", "101"], "--slo-share must be a percent"),
    (["calibrate", "--client-cores", "4096"], "--client-cores names cores"),
    (["bench", "--url", "localhost:8000"], "--url must be an http(s) URL"),
    (["check-env", "--bogus"], "unrecognized arguments: --bogus"),
    (["engine", "start", "--port", "70000"], "--port must be a port number"),  # parses itself
    (["engine", "restart"], "invalid choice: 'restart'"),
    (["latency", "--requests", "0", "vllm-cpu"], "--requests must be a positive integer"),
    (["reconcile", "/nonexistent"], "/nonexistent is not a folder"),
    (["reconcile", "."], "has no per-request records (requests.jsonl)"),
    (["peers", "run", "--peer", "llmperf"], "unknown peer 'llmperf'"),
])
def test_the_real_command_refuses_in_one_line(args: list[str], message: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]):
    """A sample through `rig`'s main (a few through the real process, _REAL): exit 2, one line
    on stderr, nothing on stdout."""
    if args in _REAL:
        done = subprocess.run([sys.executable, "-m", "loadtest.cli.main", *args],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
    else:
        monkeypatch.chdir(tmp_path)
        with pytest.raises(SystemExit) as exited:
            main(args)
        code = exited.value.code if isinstance(exited.value.code, int) else 1
        stdout, stderr = capsys.readouterr()
    assert_one_error_line(code, stderr, names=message)
    assert not stdout and not any(tmp_path.iterdir())


def test_rig_run_lists_every_option_the_locustfile_adds():
    """Locust prints its --help before it loads a locustfile, so the rig's options are listed by
    `rig run --help`: the same options, from the same function."""
    script = """
import json, sys
from locust import argument_parser as ap
bare = {o for a in ap.get_parser()._actions for o in a.option_strings}
import loadtest.engines  # registers the rig's options
full = {o for a in ap.get_parser()._actions for o in a.option_strings}
print(json.dumps(sorted(full - bare)))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    added = set(json.loads(done.stdout.splitlines()[-1]))
    assert {"--engine", "--requests", "--prompts", "--rate", "--slo"} <= added
    listed = rig("run", "--help").stdout
    assert [o for o in sorted(added) if o not in listed] == []


def test_rig_run_passes_the_options_it_checked_to_locust():
    from loadtest.cli.run import checked_args
    from loadtest.launch import RunSpec, command

    args, extra = checked_args(["--engine", "tgi", "--requests", "8", "--users", "2",
                                "--flags=--max-batch 4", "--no-pin", "--", "--loglevel", "DEBUG"])
    cmd = command(RunSpec.from_options(args, users=args.users, locust_options=tuple(extra)))
    assert cmd[cmd.index("--users"):] == ["--users", "2", "--engine", "tgi", "--requests", "8",
                                          "--flags=--max-batch 4", "--no-pin", "--loglevel",
                                          "DEBUG"]


def test_the_console_script_is_rig():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["rig"] == "loadtest.cli.main:main"
    installed = Path(sys.executable).with_name("rig")
    if installed.exists():  # after `pip install -e .` (scripts/install.sh)
        done = subprocess.run([str(installed), "--help"], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0 and "rig run" in done.stdout


def test_the_types_say_what_is_wrong_after_the_options_name():
    for kind, text, message in ((types.positive_int, "0", "must be a positive integer, got '0'"),
                                (types.positive_number, "nan", "must be a finite number"),
                                (types.positive_int_list, "1,,2", "must be positive integers"),
                                (types.positive_int_list, "4,4", "names a value twice"),
                                (types.url, "localhost", "must be an http(s) URL"),
                                (types.duration, "1x", "must be a duration")):
        with pytest.raises(types.BadValue, match=re.escape(message)):
            kind(text)
    assert types.duration("1.5m") == 90 and types.duration("500ms") == 0.5
    assert types.url("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    assert types.positive_int_list("1,8,32") == [1, 8, 32]
    assert math.isclose(types.percent("99.5"), 99.5)


@pytest.mark.parametrize("name, dest", [
    pytest.param(c.name, a.dest, id=f"{c.name}:{a.option_strings[-1]}")
    for c in PARSED for a in options(c) if a.option_strings and a.nargs != 0])
def test_a_double_dash_is_no_value(name: str, dest: str, tmp: Path, monkeypatch: pytest.MonkeyPatch):
    """argparse drops a value that is exactly "--" before the option's type sees it (so
    `rig engine start --timeout=--` once started vLLM with an empty list for its timeout)."""
    monkeypatch.chdir(tmp)
    command = BY_NAME[name]
    action = next(a for a in options(command) if a.dest == dest)
    code, _, err = check(command, _argv(action, "--", required_positionals(command)))
    assert_one_error_line(code, err, names=action.option_strings[-1])
    assert "needs a value, got '--'" in err
