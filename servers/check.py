"""python -m servers.check [ENGINE ...] [--env-file FILE]: the settings `docker compose up`
will read, checked before anything starts.

    python -m servers.check tgi             # ok: tgi (TGI_MODEL, TGI_GPUS)
    TGI_QUANTIZE=nope python -m servers.check tgi
    error: tgi: QUANTIZE must be one of ... (got 'nope')

Reads FILE (default `.env`) and the shell's environment, which wins as it does for Compose.
Checks what Compose cannot: values an engine refuses (a quantization it does not know, a
number that is not one), settings it does not take, and, where NVML finds a driver, GPU
indexes this host does not have. Without ENGINE, every engine that has a setting set.
Exit codes: 0 all fine, 2 a setting refused (one `error:` line).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from loadtest.toolkit.args import RigParser, command_prog
from servers.gpus import gpu_count
from servers.registry import ENGINES, engine, from_env, validate
from servers.settings import SettingError, env_name

__all__ = ["check", "main", "parser", "read_env_file"]

_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


def read_env_file(path: Path) -> dict[str, str]:
    """`KEY=VALUE` lines of a Compose `.env` file (comments, blanks and quotes as Compose reads
    them); {} when there is no file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingError(f"{path}: cannot read it ({exc})") from None
    values = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            raise SettingError(f"{path}:{number}: not a KEY=VALUE line")
        key, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        values[key] = value
    return values


def check(slugs: list[str], env: dict[str, str], gpus: int | None) -> list[str]:
    """One "ok" line per engine checked; SettingError (one line) at the first refusal."""
    for slug in slugs:
        engine(slug)
    chosen = slugs or [slug for slug in ENGINES if from_env(slug, env)]
    lines = []
    for slug in chosen:
        settings = from_env(slug, env)
        validate(slug, settings, gpus if ENGINES[slug].gpu else None)
        names = ", ".join(env_name(slug, name) for name in settings) or "no settings: defaults"
        lines.append(f"ok: {slug} ({names})")
    return lines or ["ok: no engine has a setting set"]


def parser() -> RigParser:
    p = RigParser(prog=command_prog("python -m servers.check"),
                  description="Check the engine settings `docker compose up` will read (a .env "
                              "file and the environment) before anything starts.",
                  epilog="example:\n  rig check-env tgi --env-file .env\n"
                         "exit: 0 all fine, 2 a setting refused (one error: line)")
    p.add_argument("engines", nargs="*", metavar="ENGINE",
                   help="engines to check (default: every engine with a setting set)")
    p.add_argument("--env-file", type=Path, default=Path(".env"),
                   help="the settings file (default .env; a missing file is no settings)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    count = gpu_count()
    try:
        env = {**read_env_file(args.env_file), **os.environ}
        lines = check(args.engines, env, count or None)  # no driver: GPU indexes not checked
    except SettingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    if not count:
        print("(no NVIDIA driver here: GPU indexes not checked against the host)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
