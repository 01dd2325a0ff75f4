"""The rig's floors, checked from its source: the commands (loadtest/cli) on top, nothing below
importing them; the toolkit (loadtest/toolkit) and the launcher (loadtest/launch) below every
command; the repository root computed in one place; no function copied word for word."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FRONT_DOOR = "loadtest.cli"
# The rig's own code: what runs the rig (tests may import anything).
SOURCES = ("loadtest", "servers", "scripts")


def _sources() -> list[Path]:
    return sorted(p for top in SOURCES for p in (REPO / top).rglob("*.py")
                  if "__pycache__" not in p.parts)


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
