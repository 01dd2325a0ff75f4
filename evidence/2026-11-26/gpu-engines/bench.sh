#!/usr/bin/env bash
# lease B's measurer check on vLLM, from the frozen tree (/tmp/rig/tree, HEAD's loadtest/)
set -u
H=/work/main/evidence/2026-11-26/gpu-engines/host.sh
cd /work/main && bash $H install vllm 2>&1 | head -n 1
cd /tmp/rig/tree
source <(sed -n '/^export /p' $H)
$T/rig/python scripts/bench_client.py --engine vllm --users 128 --rounds 3 --requests 1536 \
  --max-tokens 128 --gpu 0 --out /tmp/rig/bench; echo "BENCH-DONE rc=$? $(date -u +%T)"
$T/rig/python -m loadtest.cli.main calibrate --quick --out /tmp/rig/calibration; echo "CALIBRATE-DONE rc=$? $(date -u +%T)"
