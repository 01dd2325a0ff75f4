#!/usr/bin/env bash
# usage: scripts/sweep_threads.sh ENGINE [--users 24,64,128,256] [--repeats 3] [--requests N]
#          [--max-tokens M] [--prompts mixed|story|FILE] [--ignore-eos] [--slo TARGETS] [--host URL [--flags TEXT]]
#          [--set SETTING=VALUE ...] [--launch local|compose] [--name NAME] [--out results] [--dry-run]
#   e.g. scripts/sweep_threads.sh vllm-cpu --users 1,4,16,64 --repeats 2 --requests 64 --max-tokens 32
#        scripts/sweep_threads.sh tgi --host http://127.0.0.1:8080 --users 24,64,128,256
#   The same fixed workload at each user count, R times each, after one warm-up run; every run is
#   appended to OUT/runs.csv, progress is kept in OUT/sweeps/NAME/sweep.json (re-run to resume),
#   and a table of completion time and output tok/s per user count is printed (fastest and knee
#   marked). Without --host the engine is started and stopped (vllm-cpu: the local embedded one).
#   All options: .venv/bin/python -m loadtest.sweep.threads --help
set -euo pipefail
usage() { sed -n '2,12s/^# \{0,1\}//p' "$0"; }
[[ ${1:-} == -h || ${1:-} == --help ]] && { usage; exit 0; }
[[ $# -ge 1 && $1 != -* ]] || { echo "error: the first argument is the ENGINE (see --help)" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
[[ -x $root/.venv/bin/python ]] || { echo "error: no $root/.venv: run scripts/install.sh" >&2; exit 2; }
cmd=("$root/.venv/bin/python" -m loadtest.sweep.threads "$@")
echo "+ ${cmd[*]}" >&2
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec "${cmd[@]}"
