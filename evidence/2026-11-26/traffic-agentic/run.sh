#!/usr/bin/env bash
# vLLM CPU and llama.cpp CPU raced on 12 made-up agent sessions (make_sessions.py; 287 calls,
# 84 sub-agents), replayed on their own schedule at 1x and 3x speed, 32 requests in flight at most,
# each call asking exactly its recorded output length (--ignore-eos).
# usage: evidence/2026-11-26/traffic-agentic/run.sh OUT
set -euo pipefail
out=${1:?results folder}
here=evidence/2026-11-26/traffic-agentic
.venv/bin/python "$here/make_sessions.py" "$out/sessions" 12
for x in 1 3; do
  .venv/bin/rig race --engines vllm-cpu,llamacpp-cpu --port "${PORT:-18735}" 32 287 \
    --out "$out/x$x" --workload agentic --trace "$out/sessions" --speedup "$x" --ignore-eos > "$out/race-x$x.log" 2>&1 \
    || echo "race x$x: exit $?"
done
