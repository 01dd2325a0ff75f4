"""The option types every command of the rig shares.

Each type is a function from the option's text to its value that raises `BadValue` with a
message that reads after the option's name ("must be a positive integer, got '0'"). `BadValue`
is both argparse's `ArgumentTypeError` (so argparse prints the message as is, on one line) and a
`ValueError` (so code outside argparse, such as the locustfile's options, can catch it and raise
its own error type with the option's name in front).
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable, Iterable
from typing import TypeVar
from pathlib import Path
from urllib.parse import urlsplit

from loadtest.cpus import allowed_cpus, cpu_set, format_cpus

T = TypeVar("T")

__all__ = ["MAX_WHOLE", "BadValue", "at_least", "cpu_list", "duration", "existing_file",
           "non_negative_int", "non_negative_number", "number_in", "one_of", "output_file",
           "percent", "port", "positive_int", "positive_int_list", "positive_number",
           "positive_number_list", "seed", "url", "writable_folder"]


class BadValue(argparse.ArgumentTypeError, ValueError):
    """A malformed option value; str() is one line that follows the option's name."""


MAX_WHOLE = 10**9  # above any count a run can reach: a larger one is a typo, not a soak test
_WHOLE = re.compile(r"[+-]?[0-9]+")


def _trimmed(text: object) -> str:
    """The text without surrounding ASCII white space. (str.strip() also drops control
    characters such as U+001F and Unicode spaces, which would make '1\x1f' read as 1.)"""
    return str(text).strip(" \t\n\r\x0b\x0c")


def _whole(text: object, minimum: int, what: str, maximum: int | None = MAX_WHOLE) -> int:
    digits = _trimmed(text)
    try:
        if not _WHOLE.fullmatch(digits):  # int() would take other scripts' digits and "1_000"
            raise ValueError(digits)
        value = int(digits)
    except ValueError:  # also a number too long for int() to read
        raise BadValue(f"must be {what}, got {text!r}") from None
    if value < minimum:
        raise BadValue(f"must be {what}, got {text!r}")
    if maximum is not None and value > maximum:
        raise BadValue(f"must be {what} up to {maximum:,}, got {text!r}")
    return value


def positive_int(text: object) -> int:
    """A whole number of at least 1 (requests, users, tokens, repeats)."""
    return _whole(text, 1, "a positive integer")


def non_negative_int(text: object) -> int:
    """A whole number of at least 0 (warm-up requests, seeds)."""
    return _whole(text, 0, "a whole number of 0 or more")


def seed(text: object) -> int:
    """A random seed: any whole number of 0 or more (no upper bound: it counts nothing)."""
    return _whole(text, 0, "a whole number of 0 or more", maximum=None)


def _finite(text: object) -> float:
    try:
        value = float(_trimmed(text))
    except ValueError:
        raise BadValue(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise BadValue(f"must be a finite number, got {text!r}")
    return value


def non_negative_number(text: object) -> float:
    """A finite number of at least 0 (temperature, seconds between samples)."""
    value = _finite(text)
    if value < 0:
        raise BadValue(f"must be at least 0, got {text!r}")
    return value


def positive_number(text: object) -> float:
    """A finite number above 0 (rates, timeouts)."""
    value = _finite(text)
    if value <= 0:
        raise BadValue(f"must be above 0, got {text!r}")
    return value


def at_least(minimum: float) -> Callable[[object], float]:
    """A type for a finite number of at least `minimum` (a timeout's floor, a rate's)."""
    def bounded(text: object) -> float:
        value = _finite(text)
        if value < minimum:
            raise BadValue(f"must be at least {minimum:g}, got {text!r}")
        return value
    bounded.__name__ = f"at_least_{minimum:g}"
    return bounded


def number_in(low: float, high: float) -> Callable[[object], float]:
    """A type for a finite number from `low` to `high`, both included (shares, fractions)."""
    def in_range(text: object) -> float:
        value = _finite(text)
        if not low <= value <= high:
            raise BadValue(f"must be from {low:g} to {high:g}, got {text!r}")
        return value
    in_range.__name__ = f"number_in_{low:g}_{high:g}"
    return in_range


def positive_int_list(text: object) -> list[int]:
    """A comma list of distinct positive integers, e.g. `1,8,32` (user counts, batch sizes)."""
    return _distinct_list(text, positive_int, "positive integers, comma-separated like 1,4,16")


def positive_number_list(text: object) -> list[float]:
    """A comma list of distinct finite numbers above 0, e.g. `0.5,1,2` (offered rates)."""
    return _distinct_list(text, positive_number, "numbers above 0, comma-separated like 1,2,4")


def _distinct_list(text: object, item: Callable[[object], T], what: str) -> list[T]:
    try:
        values = [item(part) for part in str(text).split(",")]
    except BadValue:
        raise BadValue(f"must be {what}, got {text!r}") from None
    if len(set(values)) != len(values):
        raise BadValue(f"names a value twice: {text!r}")
    return values


def percent(text: object) -> float:
    """A share in percent, above 0 and at most 100 (the share of requests meeting an SLO)."""
    value = _finite(text)
    if not 0 < value <= 100:
        raise BadValue(f"must be a percent above 0 and at most 100, got {text!r}")
    return value


def one_of(choices: Iterable[str], what: str) -> Callable[[object], str]:
    """A type for one name of `choices` (engine slugs, modes); the error lists them."""
    names = tuple(choices)

    def chosen(text: object) -> str:
        if str(text) not in names:
            raise BadValue(f"unknown {what} {str(text)!r}; choose one of: {', '.join(names)}")
        return str(text)
    chosen.__name__ = what.replace(" ", "_")
    return chosen


def port(text: object) -> int:
    """A TCP port, 1-65535."""
    value = _whole(text, 1, "a port number (1-65535)")
    if value > 65535:
        raise BadValue(f"must be a port number (1-65535), got {text!r}")
    return value


def url(text: object) -> str:
    """An http(s) URL with a host, e.g. `http://127.0.0.1:8000`; returned without a trailing /.

    A user name or password in it (`http://user:pw@host`) is refused, and never echoed: the rig
    sends no HTTP basic auth, and its requests would go to a host named "user:pw@host"."""
    value = _trimmed(text)
    shown = _without_credentials(str(text))
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a port out of range or not a number
    except ValueError:
        raise BadValue(f"must be an http(s) URL like http://127.0.0.1:8000, got {shown!r}") from None
    if (parts.scheme not in ("http", "https") or not parts.hostname
            or any(c.isspace() for c in value)):
        raise BadValue(f"must be an http(s) URL like http://127.0.0.1:8000, got {shown!r}")
    if "@" in parts.netloc:
        raise BadValue(f"must not carry a user name or password, got {shown!r}: the rig sends "
                       "no HTTP basic auth; an engine's API key goes in the environment "
                       "(LLM_API_KEY; docs/client.md)")
    return value.rstrip("/")


def _without_credentials(text: str) -> str:
    """`text` with anything between `//` and the host's `@` hidden (it may hold a password),
    whether or not the rest parses as a URL."""
    return re.sub(r"(//)[^/?#]*@", r"\1***@", text)


def existing_file(text: object) -> Path:
    """A path to a file that exists and can be read."""
    path = Path(str(text))
    if not str(text) or not path.is_file():
        raise BadValue(f"must be an existing file, got {str(text)!r}")
    if not os.access(path, os.R_OK):
        raise BadValue(f"{str(text)!r} cannot be read")
    return path


def writable_folder(text: object) -> Path:
    """A folder that exists and is writable, or could be created (its nearest existing parent is a
    writable folder). Nothing is created here: a command that then fails on another option must
    leave nothing behind."""
    path = Path(str(text))
    if not str(text) or "\0" in str(text):
        raise BadValue(f"must be a folder, got {str(text)!r}")
    probe = path.absolute()
    while not probe.exists():
        if probe.is_symlink() or probe == probe.parent:
            raise BadValue(f"{str(text)!r} cannot be created")
        probe = probe.parent
    if not probe.is_dir():
        raise BadValue(f"{str(text)!r} is not a folder ({str(probe)!r} is a file)")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise BadValue(f"{str(text)!r} is not writable")
    return path


def output_file(text: object) -> Path:
    """A file to write: not a folder, in a folder that is writable or could be created."""
    path = Path(str(text))
    if not str(text) or path.is_dir() or str(text).endswith("/"):
        raise BadValue(f"must be a file to write, got {str(text)!r}")
    writable_folder(str(path.parent))
    return path


_CPU_LIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")  # cpu_set alone takes "0-" as "0"


def cpu_list(text: object) -> str:
    """A Linux CPU list (`1`, `0-3`, `0,2-3`) of cores this process may use."""
    chosen = cpu_set(str(text)) if _CPU_LIST.fullmatch(str(text)) else set()
    if not chosen:  # not a list, or an empty range such as 3-1
        raise BadValue(f"must be a CPU list like 1 or 0-3, got {text!r}")
    cores = allowed_cpus()
    if not chosen <= cores:
        raise BadValue(f"names cores this machine does not offer (it has {format_cpus(cores)}), "
                       f"got {text!r}")
    return str(text)


_DURATION = re.compile(r"(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>ms|s|m|h|)", re.ASCII)
_SECONDS = {"ms": 0.001, "": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: object) -> float:
    """Seconds above 0, as a number or with a unit: `90`, `90s`, `1.5m`, `2h`, `500ms`."""
    match = _DURATION.fullmatch(_trimmed(text))
    seconds = float(match["number"]) * _SECONDS[match["unit"]] if match else 0.0
    if not match or not 0 < seconds < math.inf:
        raise BadValue(f"must be a duration above 0 like 90, 90s, 5m or 1h, got {text!r}")
    return seconds
