"""The fixed workload: exactly N requests drawn in order from a prompt set.

A prompt set is a JSONL file, one object per line: {"id": "...", "prompt": "..."} with an
optional per-prompt "max_tokens". `--prompts NAME` picks a set shipped in loadtest/prompts/.
Request i uses prompt i mod len(set), so every run of the same options sends the same requests,
and every process builds the same list (workers get indices, not bodies). Bodies are serialized
here, once, so the hot path only writes bytes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from loadtest.client.targets import dialect_for

__all__ = ["Prompt", "RequestSpec", "Workload", "WorkloadError", "load_prompts", "build_workload"]

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"
# A line longer than this is no prompt an engine takes (4 MiB: about a million tokens, past any
# context), and each request holds its own body, so one would multiply by --requests in memory.
MAX_LINE_CHARS = 4 << 20
MAX_FILE_BYTES = 256 << 20


class WorkloadError(ValueError):
    """A workload that cannot be built; the message is one line for the user."""


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str
    max_tokens: int | None = None


@dataclass(frozen=True)
class RequestSpec:
    request_id: int
    prompt_id: str
    path: str
    body: bytes


@dataclass(frozen=True)
class Workload:
    name: str
    specs: list[RequestSpec]
    sha256: str


def resolve_prompts(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix != ".jsonl" and not path.exists():
        path = PROMPTS_DIR / f"{name_or_path}.jsonl"
    if not path.is_file():
        shipped = ", ".join(sorted(p.stem for p in PROMPTS_DIR.glob("*.jsonl")))
        raise WorkloadError(f"no prompt file {name_or_path!r} (a .jsonl path or one of: {shipped})")
    return path


def load_prompts(name_or_path: str) -> list[Prompt]:
    path = resolve_prompts(name_or_path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise WorkloadError(f"{path}: {path.stat().st_size >> 20} MiB; a prompt file may hold "
                                f"at most {MAX_FILE_BYTES >> 20} MiB")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read it ({exc.strerror})") from None
    prompts = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            prompts.append(_parse_prompt(line, f"{path}:{number}", len(prompts)))
    if not prompts:
        raise WorkloadError(f"{path}: no prompts in file")
    return prompts


def _parse_prompt(line: str, where: str, index: int) -> Prompt:
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
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens <= 0):
        raise WorkloadError(f"{where}: \"max_tokens\" must be a positive integer")
    return Prompt(str(row.get("id", index)), row["prompt"], max_tokens)


def build_workload(prompts_name: str, requests: int, *, api: str, model: str, max_tokens: int,
                   ignore_eos: bool = False, temperature: float = 0.0,
                   ignore_eos_as: str = "ignore_eos", token_ids: bool = False) -> Workload:
    if requests <= 0:
        raise WorkloadError(f"--requests must be a positive integer, got {requests}")
    if max_tokens <= 0:
        raise WorkloadError(f"--max-tokens must be a positive integer, got {max_tokens}")
    prompts = load_prompts(prompts_name)
    dialect = dialect_for(api)
    path = dialect.PATHS[api]
    bodies = []
    for prompt in prompts:
        try:
            bodies.append(dialect.build_body(api, model, prompt.text, prompt.max_tokens or max_tokens,
                                             ignore_eos=ignore_eos, temperature=temperature,
                                             ignore_eos_as=ignore_eos_as, token_ids=token_ids))
        except ValueError as exc:
            raise WorkloadError(str(exc)) from None
    specs = [RequestSpec(i, prompts[i % len(prompts)].id, path, bodies[i % len(prompts)])
             for i in range(requests)]
    # Engine-independent: the same prompts, counts and sampling give the same hash on any engine.
    digest = hashlib.sha256(json.dumps([requests, max_tokens, ignore_eos, temperature]).encode())
    for prompt in prompts:
        digest.update(json.dumps([prompt.id, prompt.text, prompt.max_tokens]).encode())
    name = f"{resolve_prompts(prompts_name).stem}-{requests}x{max_tokens}"
    return Workload(name, specs, digest.hexdigest())
