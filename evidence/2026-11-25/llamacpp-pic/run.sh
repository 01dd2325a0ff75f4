#!/usr/bin/env bash
# llama-server built position-independent (so its archives also make libllama.so: llama.cpp
# compiled once) against the earlier build (-fPIE, gcc's default), same source, flags and core:
# 4 rounds alternating, 32 users, 256 requests x 64 tokens, the demo's prompts.
cd /work/main
out=${1:-/tmp/pic}; rm -rf "$out"; mkdir -p "$out"
declare -A BIN=([pic]=build/llama.cpp/cpu/bin/llama-server [pie]=build/llama.cpp/cpu-static-old/bin/llama-server)
for round in 1 2 3 4; do
  for build in pic pie; do
    [[ $round == 2 || $round == 4 ]] && build=$([ $build = pic ] && echo pie || echo pic)
    RIG_LLAMACPP_CPU_BINARY=${BIN[$build]} .venv/bin/rig engine start --engine llamacpp-cpu --port 18970 \
      --pidfile "$out/e.pid" --log "$out/$build-$round.log" > /dev/null || exit 1
    .venv/bin/rig run --engine llamacpp-cpu --host http://127.0.0.1:18970 --users 32 --requests 256 \
      --max-tokens 64 --ignore-eos --out "$out" --tag "$build" > "$out/$build-$round.run.log" 2>&1
    echo "$(date +%T) round $round $build rc=$? load: $(cat /proc/loadavg)"
    .venv/bin/rig engine stop --pidfile "$out/e.pid" > /dev/null
  done
done
