#!/usr/bin/env bash
# Issue 25: a race heat that resolves by repeating. llama.cpp and vLLM on CPU at 8 users, the
# demo's workload, repeated by the contenders until the 95% Welch interval on the leader's lead
# excludes 0, at most 6 runs each.
cd /work/main
out=${1:-/tmp/race}; rm -rf "$out"; mkdir -p "$out"
.venv/bin/rig race --engines llamacpp-cpu,vllm-cpu 8 --until-known --max-repeats 6 --resolve-pct 2 \
  --out "$out" 2>&1 | tee "$out/console.txt"
