#!/usr/bin/env bash
# vLLM CPU (tiny-llama) alone, and serving 1, 4 and 16 random-weight LoRA adapters, each measured
# on the same closed-loop workload (8 users, 384 requests of the mixed prompts, 32 tokens with
# --ignore-eos), spread uniformly over the adapters (16: also zipf:1.2), two repeats. vLLM turns
# torch.compile off when LoRA is on (vllm/platforms/cpu.py), so the base model also runs eager
# (--enforce-eager), and through the 16-adapter engine by its own name.
# usage: evidence/2026-11-26/traffic-lora/run.sh OUT
set -euo pipefail
out=${1:?results folder}
port=${PORT:-18734}
mkdir -p "$out"
run() {  # TAG ENGINE_FLAGS... -- RUN_OPTIONS...
  local tag=$1; shift
  local flags=(); while [[ $1 != -- ]]; do flags+=("$1"); shift; done; shift
  .venv/bin/python -m loadtest.local_engine start --engine vllm-cpu --port "$port" \
    --pidfile "$out/engine.pid" --log "$out/engine-$tag.log" -- "${flags[@]}" >/dev/null
  trap '.venv/bin/python -m loadtest.local_engine stop --pidfile "$out/engine.pid"' EXIT
  .venv/bin/rig run --engine vllm-cpu --host "http://127.0.0.1:$port" --users 4 --requests 16 \
    --max-tokens 8 --warmup --out "$out" "$@" >/dev/null 2>&1 || true
  for r in 1 2; do
    .venv/bin/rig run --engine vllm-cpu --host "http://127.0.0.1:$port" --users 8 \
      --requests 384 --max-tokens 32 --ignore-eos --telemetry-interval 0 --tag "$tag" \
      --repeat "$r" --out "$out" "$@" > "$out/run-$tag-$r.log" 2>&1 || echo "run $tag $r: exit $?"
  done
  .venv/bin/python -m loadtest.local_engine stop --pidfile "$out/engine.pid"
  trap - EXIT
}
lora() { .venv/bin/python -m servers.lora "$1" "$out/adapters"; }
run base --
run base-eager --enforce-eager --
# shellcheck disable=SC2046
run lora16-engine-base $(lora 16) --
for n in 1 4 16; do
  # shellcheck disable=SC2046
  run "lora$n" $(lora "$n") -- --lora-adapters "$n"
done
# shellcheck disable=SC2046
run lora16-zipf $(lora 16) -- --lora-adapters 16 --lora-mix zipf:1.2
