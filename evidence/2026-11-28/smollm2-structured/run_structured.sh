#!/usr/bin/env bash
# usage: run_structured.sh OUT ENGINE URL TAG: the rig's structured workload (the shipped json and
# regex tasks), each constrained and then the same prompts unconstrained (--constrain off), 8
# requests at 1 user, greedy, up to 192 tokens, answers kept; SmolLM2 served at URL.
# Run from the repository root.
set -euo pipefail
out=$1 engine=$2 url=$3 tag=$4
for constraints in json regex; do
  for constrain in on off; do
    .venv/bin/python -m locust -f loadtest/engines.py --headless --host "$url" --users 1 \
      --only-summary --engine "$engine" --api chat --workload structured \
      --constraints $constraints --constrain $constrain --requests 8 --max-tokens 192 \
      --temperature 0 --keep-outputs --telemetry-interval 0 --tag "$tag-$constraints-$constrain" \
      --out "$out" > "$out-$tag-$constraints-$constrain.log" 2>&1 || echo "exit $?: $tag-$constraints-$constrain"
  done
done
