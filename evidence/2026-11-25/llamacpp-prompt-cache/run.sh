#!/usr/bin/env bash
# Two runs of the same synthetic workload against llama.cpp: with the host prompt cache at its
# default (8 GiB) and with --cache-ram 0 (the rig's recipe now). Prints each run's engine hits.
set -u
cd /work/main
out=${1:-/tmp/llamacpp-prompt-cache}; rm -rf $out; mkdir -p $out
for mode in default off; do
  extra=(); [[ $mode == default ]] && extra=(-- --cache-ram 8192)
  .venv/bin/rig engine start --engine llamacpp-cpu --port 18990 --pidfile $out/$mode.pid --log $out/$mode.log "${extra[@]}" || exit 1
  for i in 1 2; do
    .venv/bin/rig run --engine llamacpp-cpu --host http://127.0.0.1:18990 --users 8 --requests 32 \
      --workload synthetic --input-len 128 --output-len 32 --max-tokens 32 --ignore-eos --out $out/$mode --tag $mode-$i >/dev/null 2>&1
  done
  .venv/bin/rig engine stop --pidfile $out/$mode.pid
done
for mode in default off; do
  .venv/bin/python -c "import pandas as pd; d=pd.read_csv('$out/$mode/runs.csv'); print(d[['tag','engine_prefix_cache_hit_pct','prefix_cache_reset','ttft_p50_ms','verdict']].to_string())"
done
