#!/usr/bin/env bash
# usage: run_ladder.sh OUT PASS QUANT... : for each GGUF of servers/smollm2.py in turn, start
# llama-server (the rig's CPU build, 1 thread, 8 slots), ask the 278 graded tasks at 1 user
# (greedy, 24 tokens at most, answers kept), and record the server's peak RSS (VmHWM) beside
# the run's tag; then stop it. Run from the repository root.
set -euo pipefail
out=$1 pass=$2; shift 2
server=${LLAMA_SERVER:-build/llama.cpp/cpu/bin/llama-server}
port=8111
mkdir -p "$out"
for quant in "$@"; do
  "$server" --model "models/smollm2-135m.$quant.gguf" --alias smollm2-135m --port $port --metrics \
    --threads 1 --threads-batch 1 --parallel 8 --kv-unified-per-slot 2048 --cache-ram 0 \
    > "$out/server-$quant-$pass.log" 2>&1 &
  pid=$!
  until curl -sf http://127.0.0.1:$port/health >/dev/null; do sleep 0.5; done
  .venv/bin/python -m locust -f loadtest/engines.py --headless --host http://127.0.0.1:$port \
    --users 1 --only-summary --engine llamacpp-cpu --api chat --requests "${REQUESTS:-278}" \
    --max-tokens 24 --workload structured --constraints graded --keep-outputs \
    --telemetry-interval 0 --tag "gguf-$quant-pass$pass" --out "$out" > "$out/locust-$quant-$pass.log" 2>&1
  echo "gguf-$quant-pass$pass,$(awk '/VmHWM/ {print $2}' /proc/$pid/status),$(awk '/VmRSS/ {print $2}' /proc/$pid/status),$(uptime | sed 's/.*average: //; s/,.*//')" >> "$out/memory.csv"
  kill $pid; wait $pid 2>/dev/null || true
done
