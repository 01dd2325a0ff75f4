#!/usr/bin/env bash
# usage: scripts/demo.sh [USERS[,USERS...]] [REQUESTS]
#   e.g. scripts/demo.sh 1,8,32,128 256
#   Installs the rig and the embedded engine (vLLM on CPU, tiny model), starts the engine on
#   127.0.0.1:8000, runs the fixed workload (REQUESTS x 128 output tokens) at each user count,
#   writes results/ and a report with plots, prints the table, and stops the engine.
set -euo pipefail
usage() { sed -n '2,6s/^# \{0,1\}//p' "$0" >&2; exit 2; }
[[ $# -le 2 ]] || usage
users_csv=${1:-1,8,32,128}
requests=${2:-256}
[[ $users_csv =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "error: USERS must look like 1,8,32" >&2; exit 2; }
[[ $requests =~ ^[1-9][0-9]*$ ]] || { echo "error: REQUESTS must be a positive integer" >&2; exit 2; }
cd "$(dirname "$0")/.."

scripts/install.sh
out=results
pidfile=$out/.engine.pid
mkdir -p "$out"
stop_engine() { .venv/bin/python -m loadtest.local_engine stop --pidfile "$pidfile"; }
trap stop_engine EXIT
trap 'exit 130' INT TERM
.venv/bin/python -m loadtest.local_engine start --port 8000 --pidfile "$pidfile" --log "$out/engine.log"

locust() {
  local cmd=(.venv/bin/locust -f loadtest/engines.py --headless --only-summary --engine vllm-cpu
             --host http://127.0.0.1:8000 --max-tokens 128 --ignore-eos --out "$out" "$@")
  echo "+ ${cmd[*]}" >&2
  "${cmd[@]}"
}
# Warm-up: first requests pay one-off costs; measured, kept in its folder, never in runs.csv.
locust --users 8 --requests 16 --warmup > "$out/warmup.log" 2>&1
IFS=, read -ra users_list <<< "$users_csv"
for users in "${users_list[@]}"; do
  locust --users "$users" --requests "$requests" --tag demo
done
.venv/bin/python -m loadtest.report "$out"
