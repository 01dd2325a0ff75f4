"""The docs' tables generated from the tables the code runs on, so the two cannot drift.

    python -m loadtest.results.docs                      print every table
    python -m loadtest.results.docs --write FILE         rewrite them in FILE, between markers
    python -m loadtest.results.docs --check FILE         exit 1 naming a table FILE has stale

A table sits in a page between `<!-- generated: NAME ... -->` and `<!-- end of generated: NAME -->`;
TABLES names them: `columns` (loadtest/results/schema.py) and `rules` (loadtest/results/rules.py).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from loadtest.toolkit.args import RigParser, command_prog, fail
from loadtest.results import rules, schema

__all__ = ["TABLES", "block", "found", "main", "rewrite"]

TABLES: dict[str, Callable[[], str]] = {"columns": schema.markdown, "rules": rules.markdown}


def _begin(name: str) -> str:
    return (f"<!-- generated: {name} (python -m loadtest.results.docs --write FILE); "
            "do not edit -->")


def _end(name: str) -> str:
    return f"<!-- end of generated: {name} -->"


def block(name: str) -> str:
    """The table `name` between its markers, as a page holds it."""
    return f"{_begin(name)}\n\n{TABLES[name]()}\n\n{_end(name)}"


def found(text: str, name: str) -> str | None:
    """The block of table `name` in `text`, as it stands; None when the page has none."""
    match = re.search(re.escape(_begin(name)) + ".*?" + re.escape(_end(name)), text, re.S)
    return match.group(0) if match else None


def rewrite(text: str) -> str:
    """`text` with every table it holds regenerated."""
    for name in TABLES:
        old = found(text, name)
        if old is not None:
            text = text.replace(old, block(name))
    return text


def main(argv: list[str] | None = None) -> int:
    parser = RigParser(prog=command_prog("python -m loadtest.results.docs"),
                       description="The docs' tables of runs.csv's columns and of the warnings "
                                   "and verdict reasons, generated from the code's own tables.")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", type=Path, metavar="FILE", help="regenerate the tables in FILE")
    mode.add_argument("--check", type=Path, metavar="FILE",
                      help="exit 1 if a table in FILE differs from the code's")
    args = parser.parse_args(argv)
    if args.write is None and args.check is None:
        print("\n\n".join(block(name) for name in TABLES))
        return 0
    path = args.write or args.check
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"{path}: cannot read it ({getattr(exc, 'strerror', None) or exc})")
    if not any(found(text, name) for name in TABLES):
        fail(f"{path} holds no generated table (no <!-- generated: ... --> marker)")
    fresh = rewrite(text)
    if args.check:
        stale = [name for name in TABLES if found(text, name) not in (None, block(name))]
        for name in stale:
            print(f"{path}: the {name} table is stale: run python -m loadtest.results.docs "
                  f"--write {path}", file=sys.stderr)
        return 1 if stale else 0
    if fresh != text:
        try:
            path.write_text(fresh, encoding="utf-8")
        except OSError as exc:
            fail(f"{path}: cannot write it ({exc.strerror})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
