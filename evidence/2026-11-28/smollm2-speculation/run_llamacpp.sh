#!/usr/bin/env bash
# usage: run_llamacpp.sh OUT K... : llama-server (the rig's CPU build, SmolLM2 Q4_1, 1 thread)
# without speculation (K=0) or with n-gram prompt lookup drafting up to K tokens (--spec-type
# ngram-simple, a 2-token lookup: llama.cpp drafts nothing where the lookup is longer than K);
# on each, both prompt sets (repeat.jsonl: answers that copy the prompt; the shipped story set:
# answers that do not), each prompt once at 1 user, greedy, up to 128 tokens, answers kept. The
# engine's own acceptance counts (its per-request "draft acceptance" log lines) go to
# OUT/acceptance.csv. SETS: the prompt sets, if not both; USERS, REQUESTS and SLOTS (--parallel):
# 1, 8 and 2 unless given (../smollm2-speculation-users sets them). Run from the repository root.
set -euo pipefail
out=$1; shift
here=evidence/2026-11-28/smollm2-speculation
port=8121
mkdir -p "$out"
for k in "$@"; do
  spec=()
  (( k > 0 )) && spec=(--spec-type ngram-simple --spec-ngram-simple-size-n 2 --spec-ngram-simple-size-m "$k")
  log=$out/server-k$k.log
  build/llama.cpp/cpu/bin/llama-server --model models/smollm2-135m.Q4_1.gguf --alias smollm2-135m \
    --port $port --threads 1 --threads-batch 1 --parallel ${SLOTS:-2} --cache-ram 0 "${spec[@]}" > "$log" 2>&1 &
  pid=$!
  until curl -sf http://127.0.0.1:$port/health >/dev/null; do sleep 0.5; done
  for prompts in ${SETS:-"$here/repeat.jsonl" story}; do
    name=$(basename "$prompts" .jsonl)
    before=$(grep -c "draft acceptance" "$log" || true)
    .venv/bin/python -m locust -f loadtest/engines.py --headless --host http://127.0.0.1:$port \
      --users ${USERS:-1} --only-summary --engine llamacpp-cpu --api chat --prompts "$prompts" --requests ${REQUESTS:-8} \
      --max-tokens 128 --temperature 0 --keep-outputs --telemetry-interval 0 \
      --flags "${spec[*]:-none}" --tag "k$k-$name${USERS:+-u$USERS}" --out "$out" > "$out/locust-k$k-$name.log" 2>&1
    { grep "draft acceptance" "$log" || true; } | tail -n +$((before + 1)) \
      | sed -E 's/.*\( *([0-9]+) accepted \/ *([0-9]+) generated.*/\1 \2/' \
      | awk -v tag="k$k-$name${USERS:+-u$USERS}" -v load="$(uptime | sed 's/.*average: //; s/,.*//')" \
          '{a += $1; d += $2} END {print tag "," d + 0 "," a + 0 "," load}' >> "$out/acceptance.csv"
  done
  kill $pid; wait $pid 2>/dev/null || true
done
