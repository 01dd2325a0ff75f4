"""The tables of README.md from runs-*.csv and answers.jsonl (run from this folder): every vLLM
configuration on one host (one H200, one after another), answers compared with this lease's vLLM
bf16 without speculation at the same user count."""
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

CONFIGS = (("vllm", "none", "vLLM bf16"), ("vllm", "k2", "vLLM, n-gram K=2"), ("vllm", "k8", "vLLM, n-gram K=8"),
           ("vllm", "ngram_gpu", "vLLM, ngram_gpu K=2"), ("vllm", "fp8", "vLLM fp8"),
           ("aphrodite", "none", "Aphrodite bf16"))


def same_as_none(key: tuple[str, str], prompts: str, users: int) -> str:
    mine, base = answers[key], answers[("vllm", f"none-{prompts}-u{users}")]
    return f"{sum(mine[p] == base.get(p) for p in mine)}/{len(mine)}" if base else "-"


def verdict(r: dict) -> str:
    return "valid" if r["verdict"] == "valid" else f"**invalid** ({r['verdict_reasons']})"


def against_none(r: dict, prompts: str, users: int) -> str:
    base = rows.get(("vllm", f"none-{prompts}-u{users}"))
    if not base:
        return "-"
    ratio = f"{float(r['output_tok_per_s']) / float(base['output_tok_per_s']):.2f}x"
    return ratio if r["verdict"] == base["verdict"] == "valid" else f"({ratio}: an invalid run)"


print("| config | prompts | users | output tok/s | x none | drafted | accepted | TTFT p50 ms | ITL p50 ms "
      "| graded right | answers as none's | verdict |")
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
            print(f"| {label} | {prompts} | {users} | {float(r['output_tok_per_s']):,.0f} | {against_none(r, prompts, users)} "
                  f"| {f'{float(drafted):,.0f}' if drafted else '-'} | {acc} | {float(r['ttft_p50_ms']):.1f} "
                  f"| {float(r['itl_p50_ms']):.2f} | {right} | {same_as_none((engine, r['tag']), prompts, users)} "
                  f"| {verdict(r)} |")
