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
