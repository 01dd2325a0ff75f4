#!/usr/bin/env bash
# usage: evidence/2026-11-28/h200-lease3/ngram-gpu.sh  (started in the lease once GPU 0 was free)
# vLLM on SmolLM2 with its GPU n-gram drafter (`--speculative-config.method ngram_gpu`, K=2,
# lookup up to 4 tokens: VLLM_SPECULATE's flags with the other method), to see whether it keeps
# the async scheduling that the CPU n-gram drafter turns off: the copy-the-prompt and story sets
# at 1 and 8 users, the graded set at 1 user; GPU 0, lane A's cores, the functions of lease.sh.
set -uo pipefail
eval "$(sed -n '/^set -uo/,/^lane() {/p' evidence/2026-11-28/h200-lease3/lease.sh | sed '$d')"
export GPU=0 CLIENT=0,1 ENGINE=2-15 CUDA_VISIBLE_DEVICES=0
await test -e $W/lane-A2.finished
stamp "vllm ngram_gpu start"
VLLM_EXTRA_ARGS="--speculative-config.method ngram_gpu --speculative-config.num_speculative_tokens 2 --speculative-config.prompt_lookup_max 4" \
  VLLM_MODEL=$SMOL VLLM_SERVED_MODEL_NAME=smollm2-135m VLLM_GPUS=$GPU rig engine start --engine vllm \
  --port 8002 --cpus $ENGINE --pidfile $W/vng.pid --log $R/vllm-ngram-gpu.log --timeout 300 \
  || { tail -30 $R/vllm-ngram-gpu.log; touch $W/lane-A3.finished; exit 1; }
grep -i -E "async|ngram" $R/vllm-ngram-gpu.log | head -5
for users in 1 8; do
  for prompts in $SPEC/repeat.jsonl story; do
    rig run --engine vllm --host http://127.0.0.1:8002 --users $users --requests $((users == 1 ? 32 : 160)) \
      --api chat --prompts $prompts --max-tokens 128 --temperature 0 --keep-outputs --telemetry-interval 2 \
      --client-cpus $CLIENT --gpu $GPU --tag ngram_gpu2-$(basename $prompts .jsonl)-u$users --out $R/smollm2-vllm 2>&1 | tail -3
  done
done
rig run --engine vllm --host http://127.0.0.1:8002 --users 1 --requests 278 --api chat --workload structured \
  --constraints graded --max-tokens 24 --temperature 0 --keep-outputs --telemetry-interval 2 --client-cpus $CLIENT \
  --gpu $GPU --tag ngram_gpu2-graded-u1 --out $R/smollm2-vllm 2>&1 | tail -3
rig engine stop --pidfile $W/vng.pid; stamp "vllm ngram_gpu done"; touch $W/lane-A3.finished
