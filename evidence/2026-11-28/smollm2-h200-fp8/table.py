"""The tables of README.md from runs-*.csv and answers.jsonl (run from this folder)."""
import csv
import json
from collections import defaultdict

rows = {(e, r["tag"]): r for e in ("vllm", "aphrodite") for r in csv.DictReader(open(f"runs-{e}.csv"))}
answers = defaultdict(dict)  # (engine, tag) -> prompt -> set of texts
for line in open("answers.jsonl"):
    a = json.loads(line)
    answers[(a["engine"], a["tag"])][a["prompt_id"]] = {x["text"] for x in a["answers"]}


def same(key: tuple[str, str], base: tuple[str, str]) -> str:
    mine, theirs = answers[key], answers[base]
    return f"{sum(mine[p] == theirs.get(p) for p in mine)}/{len(mine)}"


print("| prompts | users | bf16 tok/s (ITL p50 ms) | fp8 tok/s (ITL p50 ms) | fp8 / bf16 | graded right: bf16, fp8 "
      "| fp8's answers as bf16's | verdicts |")
print("|---|---|---|---|---|---|---|---|")
for prompts in ("story", "graded"):
    for users in (1, 64):
        none, fp8 = rows[("vllm", f"none-{prompts}-u{users}")], rows[("vllm", f"fp8-{prompts}-u{users}")]
        right = (f"{float(none['answers_correct']):.0f}/{float(none['answers_graded']):.0f}, "
                 f"{float(fp8['answers_correct']):.0f}/{float(fp8['answers_graded']):.0f}"
                 if none.get("answers_graded") else "-")
        ratio = float(fp8["output_tok_per_s"]) / float(none["output_tok_per_s"])
        print(f"| {prompts} | {users} | {float(none['output_tok_per_s']):,.0f} ({float(none['itl_p50_ms']):.2f}) "
              f"| {float(fp8['output_tok_per_s']):,.0f} ({float(fp8['itl_p50_ms']):.2f}) | {ratio:.2f}x | {right} "
              f"| {same(('vllm', fp8['tag']), ('vllm', none['tag']))} | {none['verdict']}, {fp8['verdict']} |")
aph = rows[("aphrodite", "none-story-u1")]
print()
print(f"Aphrodite bf16 on the folder as now made, stories at one user: {float(aph['output_tok_per_s']):,.0f} tok/s "
      f"(ITL p50 {float(aph['itl_p50_ms']):.2f} ms), {aph['verdict']}; answers as vLLM bf16's: "
      f"{same(('aphrodite', 'none-story-u1'), ('vllm', 'none-story-u1'))}")
