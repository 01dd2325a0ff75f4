#!/usr/bin/env bash
# usage: run_natural.sh OUT ENGINE URL [locust options...]: the race's prompts (mixed), each once,
# at 3 users, greedy, up to 256 tokens and no --ignore-eos (each answer stops where the model
# stops), answers kept; SmolLM2 served at URL. Run from the repository root.
set -euo pipefail
out=$1 engine=$2 url=$3; shift 3
.venv/bin/python -m locust -f loadtest/engines.py --headless --host "$url" --users 3 \
  --only-summary --engine "$engine" --prompts mixed --requests 9 --max-tokens 256 \
  --temperature 0 --keep-outputs --telemetry-interval 0 --tag natural --out "$out" "$@"
