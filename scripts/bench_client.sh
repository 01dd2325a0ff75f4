#!/usr/bin/env bash
# usage: scripts/bench_client.sh [--url URL] [--requests N] [--max-tokens M] [--users U] [--rounds R]
#   Measures the measurer: this rig's Locust path against a minimal aiohttp client on the same
#   engine and workload (default: 256 requests x 128 tokens, ignore_eos, 128 concurrent), and
#   prints the ratios. Without --url it starts the embedded vLLM CPU engine and stops it after.
#   The same as `rig bench` (loadtest/bench/client.py; --help lists every option).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == -h || ${1:-} == --help ]]; then  # before the install: nothing installed for help
  sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"
  [[ -x .venv/bin/python ]] && exec .venv/bin/python -m loadtest.bench.client --help
  exit 0
fi
scripts/install.sh > /dev/null
exec .venv/bin/python -m loadtest.bench.client "$@"
