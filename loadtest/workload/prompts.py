"""Prompt sets: a JSONL file, one object per line: {"id": "...", "prompt": "..."} with an
optional per-prompt "max_tokens". `--prompts NAME` picks a set shipped in loadtest/prompts/.
Request i uses prompt i mod len(set), so every run of the same options sends the same requests.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from loadtest.toolkit.repo import REPO
from loadtest.workload.items import Context, Item
from loadtest.workload.spec import WorkloadError

__all__ = ["PROMPTS_DIR", "Prompt", "json_lines", "load_prompts", "prompt_items",
           "prompts_identity", "resolve_prompts"]

PROMPTS_DIR = REPO / "loadtest" / "prompts"
# A line longer than this is no prompt an engine takes (4 MiB: about a million tokens, past any
# context), and each request holds its own body, so one would multiply by --requests in memory.
MAX_LINE_CHARS = 4 << 20
MAX_FILE_BYTES = 256 << 20


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str
    max_tokens: int | None = None


def resolve_prompts(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix != ".jsonl" and not path.exists():
        path = PROMPTS_DIR / f"{name_or_path}.jsonl"
    if not path.is_file():
        shipped = ", ".join(sorted(p.stem for p in PROMPTS_DIR.glob("*.jsonl")))
        raise WorkloadError(f"no prompt file {name_or_path!r} (a .jsonl path or one of: {shipped})")
    return path


def read_text(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """A workload file's text; WorkloadError (one line) when it is too big, unreadable or not UTF-8."""
    try:
        size = path.stat().st_size
        if size > limit:
            raise WorkloadError(f"{path}: {size >> 20} MiB; a workload file may hold at most "
                                f"{limit >> 20} MiB")
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read it ({exc.strerror})") from None


def json_lines(text: str) -> list[tuple[int, str]]:
    """A JSONL text's non-blank lines with their numbers. Lines end at "\n" alone (a "\r" before
    it is JSON white space): str.splitlines() also breaks at "\r", U+2028 and other characters
    that JSON allows raw inside a string, and would number the lines after them wrongly."""
    return [(number, line) for number, line in enumerate(text.split("\n"), start=1)
            if line.strip(" \t\r")]


def load_prompts(name_or_path: str) -> list[Prompt]:
    path = resolve_prompts(name_or_path)
    text = read_text(path)
    prompts = []
    for number, line in json_lines(text):
        prompts.append(parse_prompt(line, f"{path}:{number}", len(prompts)))
    if not prompts:
        raise WorkloadError(f"{path}: no prompts in file")
    return prompts


def parse_prompt(line: str, where: str, index: int) -> Prompt:
    if len(line) > MAX_LINE_CHARS:
        raise WorkloadError(f"{where}: a line of {len(line) >> 20} MiB; a prompt may be at most "
                            f"{MAX_LINE_CHARS >> 20} MiB (about a million tokens)")
    try:
        row = json.loads(line)
    except ValueError as exc:
        raise WorkloadError(f"{where}: not valid JSON ({exc.msg})") from None
    if not isinstance(row, dict) or not isinstance(row.get("prompt"), str) or not row["prompt"]:
        raise WorkloadError(f"{where}: each line needs a non-empty string \"prompt\"")
    max_tokens = row.get("max_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                   or max_tokens <= 0):
        raise WorkloadError(f"{where}: \"max_tokens\" must be a positive integer")
    return Prompt(str(row.get("id", index)), row["prompt"], max_tokens)


def prompt_items(prompts_name: str, context: Context) -> list[Item]:
    """One item per prompt of the set; build.py cycles them over the requests."""
    return [Item(p.id, p.text, p.max_tokens or context.max_tokens)
            for p in load_prompts(prompts_name)]


def prompts_identity(prompts_name: str, requests: int, max_tokens: int, ignore_eos: bool,
                     temperature: float) -> tuple[str, str]:
    """(name, sha256) of a prompt-set workload. The hash is the one runs have always carried:
    the same prompts, counts and sampling give the same hash on any engine."""
    digest = hashlib.sha256(json.dumps([requests, max_tokens, ignore_eos, temperature]).encode())
    for prompt in load_prompts(prompts_name):
        digest.update(json.dumps([prompt.id, prompt.text, prompt.max_tokens]).encode())
    return f"{resolve_prompts(prompts_name).stem}-{requests}x{max_tokens}", digest.hexdigest()
