"""The tables of README.md from runs-*.csv and answers.jsonl (run from this folder); the answers
are compared with vLLM bf16 without speculation from the previous lease (../smollm2-vllm-gpu)."""
import csv
import json
from collections import defaultdict

rows = {}
for engine in ("vllm", "aphrodite"):
    for r in csv.DictReader(open(f"runs-{engine}.csv")):
        rows[(engine, r["tag"])] = r
answers = defaultdict(dict)  # (engine, tag) -> prompt -> set of texts
for line in open("answers.jsonl"):
    a = json.loads(line)
    answers[(a["engine"], a["tag"])][a["prompt_id"]] = {x["text"] for x in a["answers"]}
for line in open("../smollm2-vllm-gpu/answers.jsonl"):
    a = json.loads(line)
    answers[("vllm-lease2", a["tag"])][a["prompt_id"]] = {x["text"] for x in a["answers"]}

CONFIGS = (("vllm", "k8", "vLLM, n-gram K=8 (CPU drafter)"), ("vllm", "ngram_gpu2", "vLLM, ngram_gpu K=2"),
           ("vllm", "fp8", "vLLM, fp8, no speculation"), ("aphrodite", "none", "Aphrodite, bf16, none"))


def same_as_bf16(key: tuple[str, str], prompts: str, users: int) -> str:
    mine, base = answers[key], answers[("vllm-lease2", f"none-{prompts}-u{users}")]
    return f"{sum(mine[p] == base.get(p) for p in mine)}/{len(mine)}"


def verdict(r: dict) -> str:
    return "valid" if r["verdict"] == "valid" else f"**invalid** ({r['verdict_reasons']})"


print("| config | prompts | users | output tok/s | drafted | accepted | TTFT p50 ms | ITL p50 ms | e2e p50 ms "
      "| graded right | answers as bf16's | verdict |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for engine, config, label in CONFIGS:
    for prompts in ("repeat", "story", "graded"):
        for users in ((1, 8, 64) if prompts != "graded" else (1, 64)):
            r = rows.get((engine, f"{config}-{prompts}-u{users}"))
            if r is None:
                continue
            drafted, accepted = r.get("engine_spec_drafted_tokens"), r.get("engine_spec_accepted_tokens")
            acc = f"{float(accepted):,.0f} ({100 * float(accepted) / float(drafted):.0f}%)" if drafted else "-"
            right = f"{float(r['answers_correct']):.0f}/{float(r['answers_graded']):.0f}" if r["answers_graded"] else "-"
            print(f"| {label} | {prompts} | {users} | {float(r['output_tok_per_s']):,.0f} "
                  f"| {f'{float(drafted):,.0f}' if drafted else '-'} | {acc} | {float(r['ttft_p50_ms']):.1f} "
                  f"| {float(r['itl_p50_ms']):.2f} | {float(r['e2e_p50_ms']):,.0f} | {right} "
                  f"| {same_as_bf16((engine, r['tag']), prompts, users)} | {verdict(r)} |")
