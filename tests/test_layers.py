"""The rig's floors, checked from its source: the commands (loadtest/cli) on top, nothing below
importing them; the toolkit (loadtest/toolkit) and the launcher (loadtest/launch) below every
command; the repository root computed in one place; no function copied word for word."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

from sources import rig_sources

REPO = Path(__file__).resolve().parents[1]
FRONT_DOOR = "loadtest.cli"
# The rig's own code: what runs the rig (tests may import anything).
SOURCES = ("loadtest", "servers", "scripts")


def _sources() -> list[Path]:
    return rig_sources(*SOURCES)


def _imported(path: Path) -> set[str]:
    """Every module `path` imports by name: import statements, `from X import Y` (also as X.Y,
    since Y may be a module) and importlib.import_module("X") with a constant name."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value)
    return names


def _in_front_door(module: str) -> bool:
    return module == FRONT_DOOR or module.startswith(FRONT_DOOR + ".")


def test_nothing_outside_the_commands_imports_them():
    """Only loadtest/cli imports loadtest/cli. A `__main__` module is run, never imported, so it
    is a door of its own: `python -m loadtest.sweep` is `rig sweep`, and may say so."""
    upward = {}
    for path in _sources():
        relative = path.relative_to(REPO)
        if relative.parts[:2] == ("loadtest", "cli") or path.name == "__main__.py":
            continue
        found = sorted(m for m in _imported(path) if _in_front_door(m))
        if found:
            upward[str(relative)] = found
    assert upward == {}


def test_a_main_module_that_imports_the_commands_only_hands_them_its_command_line():
    for path in _sources():
        if path.name == "__main__.py" and path.relative_to(REPO).parts[:2] != ("loadtest", "cli"):
            found = {m for m in _imported(path) if _in_front_door(m)}
            assert found <= {"loadtest.cli.main", "loadtest.cli.main.main"}, path


def test_the_toolkit_imports_nothing_above_it():
    allowed = ("loadtest.toolkit", "loadtest.cpus", "loadtest.known")
    for path in (REPO / "loadtest" / "toolkit").glob("*.py"):
        rig = {m for m in _imported(path) if m.split(".")[0] in ("loadtest", "servers")}
        above = {m for m in rig if not any(m == a or m.startswith(a + ".") for a in allowed)}
        assert above == set(), f"{path.name} imports {sorted(above)}"


def _importable(path: Path) -> bool:
    """Whether `path` is a module of a package (every folder a Python name); a file under a
    folder such as servers/vllm-cpu is a script run by path, in another venv, before the rig's
    packages can be imported."""
    return all(part.isidentifier() for part in path.relative_to(REPO).parts[:-1])


def _climbs_to_the_root(node: ast.AST) -> bool:
    """`Path(__file__)...parents[N]` or `...parent.parent`: a path climbed up from a file."""
    text = ast.unparse(node)
    return "__file__" in text and (".parents[" in text or ".parent.parent" in text)


def test_the_repository_root_is_computed_in_one_place():
    computed = set()
    for path in _sources():
        if not _importable(path) or path.parts[len(REPO.parts)] == "scripts":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Subscript, ast.Attribute)) and _climbs_to_the_root(node):
                computed.add(str(path.relative_to(REPO)))
    assert computed == {"loadtest/toolkit/repo.py"}


def _body(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The function's arguments and statements (its docstring and name aside), as the AST."""
    body = function.body
    first = body[0] if body else None
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        body = body[1:]
    return ast.dump(function.args) + ast.dump(ast.Module(body=body, type_ignores=[]))


def test_no_function_is_copied_word_for_word():
    """A function of some size (25 AST nodes or more: cpu_model's was 40) is written once and
    imported where it is needed; a second copy is found whatever its name."""
    where: dict[str, list[str]] = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = _body(node)
                size = sum(1 for _ in ast.walk(ast.Module(body=node.body, type_ignores=[])))
                if size >= 25:
                    where.setdefault(body, []).append(
                        f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    assert [places for places in where.values() if len(places) > 1] == []


# --- options declared once ---------------------------------------------------------------------

# The modules that declare a run's options (the registrar, loadtest/launch/options.py, calls
# their add_* functions for Locust's parser and `rig run`'s; a command takes its subset from it).
REGISTRAR = {"loadtest/launch/options.py", "loadtest/client/options.py",
             "loadtest/client/arrivals.py", "loadtest/client/timing.py",
             "loadtest/client/bounds.py", "loadtest/live/progress.py",
             "loadtest/workload/options.py", "loadtest/results/goodput.py",
             "loadtest/results/equivalence.py", "loadtest/cpus.py",
             "loadtest/workload/lora.py"}
# A command's own option that shares a run option's flag but not its meaning.
OWN_MEANING = {
    ("loadtest/sweep/threads.py", "--users"): "a list of user counts: the sweep's axis",
    ("loadtest/bench/client.py", "--users"): "a list of user counts, one bench each",
    ("loadtest/calibration/calibrate.py", "--users"): "a list: users per client process",
    ("loadtest/calibration/calibrate.py", "--processes"): "a list of process counts",
    ("loadtest/calibration/calibrate.py", "--requests"): "answers per user, not the run's total",
    ("loadtest/calibration/calibrate.py", "--api"): "the pacing server's API, one of three",
    ("loadtest/bench/client.py", "--engine"): "also the engine it starts (none by default)",
    ("loadtest/reconcile/side_by_side.py", "--engine"): "a local engine it starts",
    ("loadtest/local_engine.py", "--engine"): "the local engine to start",
    ("loadtest/telemetry/__main__.py", "--engine"): "whose metric names to sample",
    ("loadtest/local_engine.py", "--no-pin"): "the engine's cores, not the client's",
    ("loadtest/inprocess/cli.py", "--no-pin"): "the in-process worker's cores",
    ("loadtest/race/args.py", "--no-pin"): "pins nothing: neither engines nor client",
    ("loadtest/race/args.py", "--client-cpus"): "the race's usage names core lists L",
    ("loadtest/inprocess/latency.py", "--tag"): "the rows to tabulate, not a run's label",
    ("loadtest/sweep/slo.py", "--slo"): "the search's targets (a default, parsed), not a run's",
    ("loadtest/telemetry/gpu_proof.py", "--model"): "a model folder to load",
    ("loadtest/calibration/pacer.py", "--host"): "the pacing server's listening address",
    ("servers/bundle/__main__.py", "--host"): "the host a bundle is built for",
    ("scripts/bench_workload.py", "--tokenizer"): "the benchmark's own (not a run's)",
    ("scripts/bench_workload.py", "--trace"): "the benchmark's internal part's file",
}


def _run_option_flags() -> set[str]:
    from loadtest.launch.options import _declared

    # --out is each command's own results folder (checked as a folder it writes, before anything
    # is made); the locustfile's makes its folder. Not one option, so not in this count.
    return {flag for action in _declared().values() for flag in action.option_strings} - {"--out"}


def test_a_run_option_is_declared_once():
    """Issue 37: `--users` was declared in seven parsers with seven defaults, `--requests` nine
    times. A command takes a run option from the registrar (add_run_options) and changes its
    default with set_defaults; it declares the flag itself only for another meaning
    (OWN_MEANING)."""
    flags = _run_option_flags()
    again = set()
    for path in _sources():
        relative = str(path.relative_to(REPO))
        if relative in REGISTRAR:
            continue
        for node in ast.walk(ast.parse(path.read_text(), relative)):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                again |= {(relative, arg.value) for arg in node.args
                          if isinstance(arg, ast.Constant) and arg.value in flags}
    assert again - set(OWN_MEANING) == set()
    assert set(OWN_MEANING) <= again, "an exception no module needs any more"


def test_a_command_checks_a_run_option_with_the_locustfiles_check():
    """Every run option a command takes goes through the one check of its value (CHECKS), the
    check the locustfile makes (config_from_options and the others) and a sweep matrix makes."""
    from loadtest.cli.main import COMMANDS
    from loadtest.client.options import CHECKS
    from loadtest.launch.options import _declared

    declared = _declared()
    taken = 0
    for command in COMMANDS:
        parser = command.build_parser()
        for action in parser._actions if parser is not None else ():
            if getattr(action, "show_default", False):  # taken from the registrar
                taken += 1
                assert action.option_strings == declared[action.dest].option_strings
                assert action.type is CHECKS.get(action.dest, declared[action.dest].type), (
                    command.name, action.dest)
    assert taken > 30


def test_the_sweeps_workload_is_the_locustfiles_options_with_its_defaults():
    """A matrix's `workload:` names locustfile options by dest, with the locustfile's defaults,
    and its source options are the workload's own (one type: loadtest/workload/options.py)."""
    from dataclasses import fields

    from loadtest.launch.options import option_dests, run_defaults
    from loadtest.sweep import matrix
    from loadtest.workload import WorkloadOptions
    from loadtest.workload.options import OPTION_FLAGS

    own = {"requests_per_user", "source", "label", "options"}
    run = [f for f in fields(matrix.SweepWorkload) if f.name not in own]
    assert {f.name for f in run} == set(matrix._RUN_KEYS)
    assert set(matrix._RUN_KEYS) <= option_dests()
    assert {f.name: f.default for f in run} == run_defaults(*matrix._RUN_KEYS)
    assert matrix._SOURCE_KEYS == {"source", *OPTION_FLAGS} - {"workload"}
    assert set(OPTION_FLAGS) <= option_dests()
    workload = matrix.parse_matrix({"name": "t", "users": [1], "workload": {
        "source": "synthetic", "input_len": 64}, "engines": [{"engine": "vllm-cpu",
                                                              "launch": "local"}]}, None).workload
    assert isinstance(workload.options, WorkloadOptions) and workload.options.source == "synthetic"


# --- what depends on what ----------------------------------------------------------------------

def _module(path: Path) -> str:
    """loadtest/workload/spec.py -> loadtest.workload.spec; a package's __init__.py -> its name."""
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_nothing_in_the_client_imports_the_live_view():
    """Issue 53: the live view (loadtest/live: progress line, web UI, its series, Prometheus)
    reads the client's records; the measurement path never imports it, not even for a type."""
    upward = {str(path.relative_to(REPO)): sorted(m for m in _imported(path)
                                                  if _in(m, "loadtest.live"))
              for path in rig_sources("loadtest/client")}
    assert {path: found for path, found in upward.items() if found} == {}


def test_the_workload_package_has_no_import_cycle():
    """Issue 53: spec, options, lora, items, ... imported each other in a ring of nine. Every
    import counts (a lazy one in a function, one only for the type checker), so the package's
    modules can be read bottom up: spec first, build last."""
    package = "loadtest.workload"
    paths = rig_sources("loadtest/workload")
    modules = {_module(path) for path in paths}
    graph = {_module(path): {m for m in _imported(path) if m in modules} - {_module(path)}
             for path in paths}
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError("an import cycle, each imported by the next: "
                             + " -> ".join(exc.args[1])) from None
    assert f"{package}.spec" in order and len(graph) > 10
