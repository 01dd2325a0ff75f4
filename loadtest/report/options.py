"""A configuration's options as a table cell: short enough to read beside its numbers.

A run's `flags` can be hundreds of characters: sixteen LoRA adapters are sixteen `--lora PATH`
(llama.cpp) or one `--lora-modules` with sixteen `NAME=PATH` (vLLM). In a table cell a flag
given more than twice (repeated, or with more than two values) shows its first and last value
and how many: `--lora ×16 (/adapters/lora0.gguf … lora15.gguf)`, the last without the first
one's folder where they share it (`a15=…/a15` after a `NAME=`). Everything else is shown as
given, in its order. Two options of one table that would read alike are both shown whole
(``shown_options``). The exact flags stay in runs.csv and in the report's list of runs, which
shows them whole.
"""

from __future__ import annotations

import posixpath
import shlex
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["options_cell", "short_options", "shown_options"]

_MANY = 3  # values of one flag from which the cell shows first … last and the count


def shown_options(flags: Iterable[str]) -> dict[str, str]:
    """Each of ``flags`` (the options of one table) as the table shows it: shortened, unless
    another of them shortens to the same text; then both whole, so that no two read alike."""
    short = {one: short_options(one) for one in set(flags)}
    alike = Counter(short.values())
    return {one: text if alike[text] == 1 else one for one, text in short.items()}


def options_cell(shown: str) -> str:
    """Options as ``shown_options`` shows them, for a markdown cell: in backticks, or
    "(defaults)" where there are none."""
    return f"`{shown}`" if shown else "(defaults)"


def short_options(flags: str) -> str:
    """``flags`` with each flag given ``_MANY`` times or more shortened to first … last (count)."""
    try:
        tokens = shlex.split(flags)
    except ValueError:  # unbalanced quotes: shown as written
        return flags
    groups = _groups(tokens)
    if all(len(group.values) < _MANY for group in groups):
        return flags
    return " ".join(_shown(group) for group in groups)


@dataclass
class _Flag:
    """One flag, its values, and its tokens as given (the flag again before a value, if so)."""

    flag: str
    values: list[str] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)


def _groups(tokens: list[str]) -> list[_Flag]:
    """Each flag with its values, in order; a flag given again right after itself (`--lora A
    --lora B`) is one flag with two values. A flag is a token that starts with `-` or is a
    setting (`NAME=...` in capitals)."""
    groups: list[_Flag] = []
    for token in tokens:
        if groups and not _is_flag(token):
            groups[-1].values.append(token)
        elif not (groups and groups[-1].flag == token and not _is_setting(token)):
            groups.append(_Flag(token))
        groups[-1].tokens.append(token)
    return groups


def _is_flag(token: str) -> bool:
    return token.startswith("-") or _is_setting(token)


def _is_setting(token: str) -> bool:
    name, equals, _ = token.partition("=")
    return bool(equals) and name.isupper() and name.replace("_", "").isalnum()


def _shown(group: _Flag) -> str:
    flag, values = group.flag, group.values
    if len(values) < _MANY:
        return shlex.join(group.tokens)
    return f"{shlex.quote(flag)} ×{len(values)} ({values[0]} … {_beside(values[0], values[-1])})"


def _beside(first: str, last: str) -> str:
    """``last`` shown beside ``first``: a path in the first one's folder without it (…/ where a
    name= comes before the path), so the folder is said once."""
    name, equals, path = last.partition("=") if "=" in first else ("", "", last)
    folder = posixpath.dirname(first.partition("=")[2] if equals else first)
    if not folder or not path.startswith(folder + "/"):
        return last
    return f"{name}=…/{path[len(folder) + 1:]}" if equals else path[len(folder) + 1:]
