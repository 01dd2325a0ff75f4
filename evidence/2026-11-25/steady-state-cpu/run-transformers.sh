#!/usr/bin/env bash
# The 3-minute steady-state run at 32 users for transformers serve, as run.sh did for the others.
cd /work/main
out=${1:-/tmp/steady}; mkdir -p "$out"; e=transformers
echo "$(date +%T) $e load: $(cat /proc/loadavg)"
.venv/bin/rig engine start --engine $e --port 18960 --pidfile $out/$e.pid --log $out/$e.log > /dev/null || exit 1
.venv/bin/rig run --engine $e --host http://127.0.0.1:18960 --users 32 --duration 3m --warmup-s 30 --cooldown-s 10 --timeslice-s 5 --max-tokens 64 --ignore-eos --out $out --tag steady-state > $out/$e.run.log 2>&1
echo "$(date +%T) $e rc=$?"
.venv/bin/rig engine stop --pidfile $out/$e.pid > /dev/null
