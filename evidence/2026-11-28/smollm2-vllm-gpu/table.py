"""The tables of README.md from runs.csv and answers.jsonl (run from this folder)."""
import csv
import json
from collections import defaultdict

rows = {r["tag"]: r for r in csv.DictReader(open("runs.csv"))}
answers = defaultdict(dict)  # tag -> prompt -> {text: count}
for line in open("answers.jsonl"):
    a = json.loads(line)
    answers[a["tag"]][a["prompt_id"]] = {x["text"]: x["count"] for x in a["answers"]}


def same_as(tag: str, base: str) -> str:
    mine, theirs = answers[tag], answers[base]
    return f"{sum(set(mine[p]) == set(theirs.get(p, {})) for p in mine)}/{len(mine)}"


def verdict(r: dict) -> str:
    return "valid" if r["verdict"] == "valid" else f"**invalid** ({r['verdict_reasons']})"


print("| prompts | users | K | output tok/s | vs none | drafted | accepted | TTFT p50 ms | ITL p50 ms "
      "| e2e p50 ms | answers as none's | verdict |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for prompts in ("repeat", "story", "graded"):
    for users in ((1, 8, 64) if prompts != "graded" else (1, 64)):
        for config in ("none", "k2"):
            tag = f"{config}-{prompts}-u{users}"
            r, base = rows[tag], rows[f"none-{prompts}-u{users}"]
            ratio = float(r["output_tok_per_s"]) / float(base["output_tok_per_s"])
            drafted, accepted = r["engine_spec_drafted_tokens"], r["engine_spec_accepted_tokens"]
            acc = f"{accepted} ({100 * int(accepted) / int(drafted):.0f}%)" if drafted else "-"
            print(f"| {prompts} | {users} | {config[1:] if config != 'none' else '-'} | {float(r['output_tok_per_s']):,.0f} "
                  f"| {'' if config == 'none' else f'{ratio:.2f}x'} | {drafted or '-'} | {acc} "
                  f"| {float(r['ttft_p50_ms']):.1f} | {float(r['itl_p50_ms']):.2f} | {float(r['e2e_p50_ms']):,.0f} "
                  f"| {'' if config == 'none' else same_as(tag, f'none-{prompts}-u{users}')} | {verdict(r)} |")
print()
print("| config | graded set | users | correct | answers as at 1 user | prompts with more than one answer in the run |")
print("|---|---|---|---|---|---|")
for config in ("none", "k2"):
    for users in (1, 64):
        tag = f"{config}-graded-u{users}"
        r = rows[tag]
        many = sum(len(v) > 1 for v in answers[tag].values())
        print(f"| {config} | 278 tasks | {users} | {r['answers_correct']}/{r['answers_graded']} "
              f"({float(r['answers_correct_pct']):.0f}%) | {same_as(tag, f'{config}-graded-u1')} | {many} |")
for prompts in ("repeat", "story"):
    for config in ("none", "k2"):
        tag = f"{config}-{prompts}-u64"
        many = sum(len(v) > 1 for v in answers[tag].values())
        print(f"| {config} | {prompts} (8 prompts) | 64 | - | {same_as(tag, f'{config}-{prompts}-u1')} | {many} |")
