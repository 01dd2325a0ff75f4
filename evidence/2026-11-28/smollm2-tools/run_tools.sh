#!/usr/bin/env bash
# usage: run_tools.sh OUT ENGINE URL TAG: the rig's shipped tool-call tasks (weather, flights,
# calendar, support desk; tool_choice required), 8 requests at 1 user (each task twice), greedy,
# up to 128 tokens, answers kept; constrained (the tools sent) and then the same prompts with
# --constrain off (no tools); SmolLM2 served at URL. Run from the repository root.
set -euo pipefail
out=$1 engine=$2 url=$3 tag=$4
for constrain in on off; do
  .venv/bin/python -m locust -f loadtest/engines.py --headless --host "$url" --users 1 \
    --only-summary --engine "$engine" --api chat --workload structured --constraints tools \
    --constrain $constrain --requests 8 --max-tokens 128 --temperature 0 --keep-outputs \
    --telemetry-interval 0 --tag "$tag-tools-$constrain" --out "$out" \
    > "$out-$tag-tools-$constrain.log" 2>&1 || echo "exit $?: $tag-tools-$constrain"
done
