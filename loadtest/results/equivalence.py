"""Output equivalence: did two configurations give the same answers to the same prompts?

    locust ... --keep-outputs                       # each request's output in outputs.jsonl
    python -m loadtest.results.equivalence BASELINE_RUN_DIR RUN_DIR [RUN_DIR...]

With greedy decoding (--temperature 0) an engine's answer to a prompt is a function of the
model and the arithmetic: a configuration that must not change it (speculative decoding, a
scheduler flag, more replicas) should match its baseline request for request; one that does
change it (quantization, a shorter context) shows by how much. --keep-outputs (off by default:
the answers are the user's data; sweeps turn it on) writes `runs/RUN_ID/outputs.jsonl`, one
line per completed request: request_id, prompt_id, text (and, for a tools answer, its whole
calls as tool_calls: [{"name", "arguments"}]), and the token ids where the engine
streams them (vLLM-family engines are asked for them, as with --recount; other engines' answers
are kept as text, null token_ids).

Two runs compare request by request: the same request_id is the same prompt when both ran the
same prompt set (`prompts_sha256` in run.json, and each line's prompt_id; refused otherwise),
whatever else differs (the engine and its flags, max tokens, users, rate):
- exact_match_pct: requests whose token ids (else text) are identical, of those both completed;
- first_diff_token: per differing request, the index of the first token that differs (the
  shorter length when one answer is a prefix of the other); its median and minimum. Without
  token ids on both sides it is the first differing character, and `unit` says so.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loadtest.results.record import RequestRecord

__all__ = ["EquivalenceError", "OUTPUTS_FILE", "add_keep_outputs_option", "compare_outputs",
           "compare_runs", "first_difference", "read_outputs", "write_outputs"]

OUTPUTS_FILE = "outputs.jsonl"


class EquivalenceError(ValueError):
    """Two runs that cannot be compared; the message is one line for the user."""


def add_keep_outputs_option(parser: Any) -> None:
    parser.add_argument_group("llm-load-rig: outputs").add_argument(
        "--keep-outputs", action="store_true", default=False,
        help="keep each request's output text (and token ids, vLLM-family engines) in "
             "runs/RUN_ID/outputs.jsonl, to compare configurations' answers (off by default: "
             "the outputs are your data)")


def write_outputs(path: Path, records: Sequence[RequestRecord]) -> int:
    """One line per completed request that carries its output, in request order; how many."""
    rows = [{"request_id": r.request_id, "prompt_id": r.prompt_id,
             "text": "".join(r.output_text or []), "token_ids": r.output_ids,
             **({"tool_calls": r.tool_calls} if r.tool_calls else {})}
            for r in sorted(records, key=lambda r: r.request_id)
            if r.ok and r.output_text is not None]
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as file:
        for row in rows:
            file.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
    tmp.replace(path)
    return len(rows)


def read_outputs(run_dir: Path) -> dict[int, dict[str, Any]]:
    path = Path(run_dir) / OUTPUTS_FILE
    if not path.is_file():
        raise EquivalenceError(f"{run_dir} has no {OUTPUTS_FILE}: run it with --keep-outputs")
    rows = {}
    with path.open(encoding="utf-8") as file:
        for line in file:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            rows[int(row["request_id"])] = row
    return rows


def first_difference(a: Sequence[Any], b: Sequence[Any]) -> int | None:
    """Index of the first element that differs (the shorter length for a prefix); None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_outputs(baseline: dict[int, dict[str, Any]],
                    other: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Exact-match rate and first differing position over the requests both runs completed."""
    common = sorted(baseline.keys() & other.keys())
    for i in common:
        if baseline[i].get("prompt_id") != other[i].get("prompt_id"):
            raise EquivalenceError(f"request {i} asked prompt {other[i].get('prompt_id')!r}, the "
                                   f"baseline's {baseline[i].get('prompt_id')!r}: not the same prompts")
    ids = all(baseline[i].get("token_ids") is not None and other[i].get("token_ids") is not None
              for i in common) and bool(common)
    unit = "token" if ids else "char"
    positions = []
    for i in common:
        a, b = (baseline[i]["token_ids"], other[i]["token_ids"]) if ids \
            else (baseline[i]["text"], other[i]["text"])
        position = first_difference(a, b)
        if position is not None:
            positions.append(position)
    compared = len(common)
    return {
        "compared": compared,
        "exact_match": compared - len(positions),
        "exact_match_pct": 100 * (compared - len(positions)) / compared if compared else None,
        "unit": unit,
        "first_diff_p50": float(statistics.median(positions)) if positions else None,
        "first_diff_min": int(min(positions)) if positions else None,
    }


def compare_runs(baseline_dir: Path, run_dir: Path) -> dict[str, Any]:
    """compare_outputs of two run folders, after checking they ran the same prompts."""
    metas = [_meta(Path(d)) for d in (baseline_dir, run_dir)]
    shas = {m.get("prompts_sha256") for m in metas}
    if len(shas) > 1 or None in shas:
        raise EquivalenceError(f"{run_dir} ran other prompts than {baseline_dir} "
                               "(prompts_sha256 differs)")
    result = compare_outputs(read_outputs(baseline_dir), read_outputs(run_dir))
    temperatures = {m.get("temperature") for m in metas}
    result["greedy"] = temperatures == {0} or temperatures == {0.0}
    return result


def _meta(run_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise EquivalenceError(f"{run_dir}: no readable run.json (not a run folder)") from None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or args[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 0 if args and args[0] in ("-h", "--help") else 2
    try:
        for run_dir in args[1:]:
            r = compare_runs(Path(args[0]), Path(run_dir))
            diff = ("" if r["first_diff_p50"] is None else
                    f"; first differing {r['unit']} median {r['first_diff_p50']:g}, "
                    f"earliest {r['first_diff_min']}")
            note = "" if r["greedy"] else " (not greedy: sampling may differ by design)"
            print(f"{run_dir}: {r['exact_match']}/{r['compared']} requests match the baseline "
                  f"exactly ({r['exact_match_pct'] or 0:.1f}%){diff}{note}")
    except EquivalenceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
