#!/usr/bin/env bash
# Issue 25's SLO table, second pass: probes of 600 requests (tens of seconds of arrivals at the
# rates that matter, so a queue can build), a ceiling of 256 req/s above every engine's capacity,
# a floor of 8 req/s (75 s); TTFT p99 <= 1 s; every probe kept in probes.csv.
cd /work/main
out=${1:-/tmp/slo}; rm -rf "$out"; mkdir -p "$out"
.venv/bin/rig sweep slo --engines vllm-cpu,llamacpp-cpu,transformers --slo ttft_ms=1000 \
  --attainment 99 --min-rate 8 --max-rate 256 --width 10% --requests 600 --max-tokens 32 \
  --ignore-eos --users 64 --name slo-cpu --out "$out" 2>&1 | tee "$out/console.txt"
