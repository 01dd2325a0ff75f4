#!/usr/bin/env bash
# llama.cpp CPU (tiny-llama GGUF) alone, and serving 1, 4 and 16 random-weight LoRA adapters
# (python -m servers.lora N DIR --engine llamacpp: GGUF adapters, none applied unless a request
# names one), each measured on the same closed-loop workload as ../traffic-lora (8 users, 384
# requests of the mixed prompts, 32 tokens with --ignore-eos), spread uniformly over the adapters
# (16: also zipf:1.2), two repeats; then vLLM CPU, eager, base and 16 adapters, on the same
# machine in the same hour, for the race on the 16-adapter mix.
# usage: evidence/2026-11-26/traffic-lora-llamacpp/run.sh OUT
set -euo pipefail
out=${1:?results folder}
port=${PORT:-18735}
mkdir -p "$out"
run() {  # ENGINE TAG ENGINE_FLAGS... -- RUN_OPTIONS...
  local engine=$1 tag=$2; shift 2
  local flags=(); while [[ $1 != -- ]]; do flags+=("$1"); shift; done; shift
  .venv/bin/python -m loadtest.local_engine start --engine "$engine" --port "$port" \
    --pidfile "$out/engine.pid" --log "$out/engine-$tag.log" -- "${flags[@]}" >/dev/null
  trap '.venv/bin/python -m loadtest.local_engine stop --pidfile "$out/engine.pid"' EXIT
  .venv/bin/rig run --engine "$engine" --host "http://127.0.0.1:$port" --users 4 --requests 16 \
    --max-tokens 8 --warmup --out "$out" "$@" >/dev/null 2>&1 || true
  for r in 1 2; do
    .venv/bin/rig run --engine "$engine" --host "http://127.0.0.1:$port" --users 8 \
      --requests 384 --max-tokens 32 --ignore-eos --telemetry-interval 0 --tag "$tag" \
      --repeat "$r" --out "$out" "$@" > "$out/run-$tag-$r.log" 2>&1 || echo "run $tag $r: exit $?"
    grep -E "^verdict|^completion" "$out/run-$tag-$r.log" | tr '\n' ' '; echo " ($tag $r)"
  done
  .venv/bin/python -m loadtest.local_engine stop --pidfile "$out/engine.pid"
  trap - EXIT
}
lora() { .venv/bin/python -m servers.lora "$1" "$out/adapters-$2" --engine "$2"; }
run llamacpp-cpu base --
# shellcheck disable=SC2046
run llamacpp-cpu lora16-engine-base $(lora 16 llamacpp) --
for n in 1 4 16; do
  # shellcheck disable=SC2046
  run llamacpp-cpu "lora$n" $(lora "$n" llamacpp) -- --lora-adapters "$n"
done
# shellcheck disable=SC2046
run llamacpp-cpu lora16-zipf $(lora 16 llamacpp) -- --lora-adapters 16 --lora-mix zipf:1.2
run vllm-cpu vllm-base-eager --enforce-eager --
# shellcheck disable=SC2046
run vllm-cpu vllm-lora16 $(lora 16 vllm) -- --lora-adapters 16
