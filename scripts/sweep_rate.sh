#!/usr/bin/env bash
# usage: scripts/sweep_rate.sh ENGINE [--rates 1,2,4,8,16,32] [--users 64] [--arrival poisson|constant]
#          [--requests N] [--max-tokens M] [--prompts mixed|story|FILE] [--ignore-eos]
#          [--slo ttft_ms=500,itl_ms=50] [--slo-share 99] [--repeats R] [--all-rates]
#          [--host URL [--flags TEXT]] [--engine-cpus LIST] [--client-cpus LIST] [--name NAME] [--out results]
#   e.g. scripts/sweep_rate.sh vllm-cpu --rates 1,2,4,8,16 --users 32 --requests 96 --slo ttft_ms=1000
#        scripts/sweep_rate.sh vllm --host http://gpu-box:8000 --rates 8,16,32,64 --slo ttft_ms=500
#   Open loop at rising offered rates (req/s), the same fixed workload each time, after one
#   warm-up run; stops after the first rate the engine cannot sustain (--all-rates: runs them
#   all). Prints a table per rate (latency from the schedule and from the send, send lag, goodput)
#   with the knee and the highest rate meeting --slo, and writes OUT/report-NAME/.
#   Without --host the local engine is started on a free port and stopped at the end.
#   All options: .venv/bin/python -m loadtest.sweep.rates --help
set -euo pipefail
usage() { sed -n '2,13s/^# \{0,1\}//p' "$0"; }
[[ ${1:-} == -h || ${1:-} == --help ]] && { usage; exit 0; }
[[ $# -ge 1 && $1 != -* ]] || { echo "error: the first argument is the ENGINE (see --help)" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
[[ -x $root/.venv/bin/python ]] || { echo "error: no $root/.venv: run scripts/install.sh" >&2; exit 2; }
cmd=("$root/.venv/bin/python" -m loadtest.sweep.rates "$@")
echo "+ ${cmd[*]}" >&2
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec "${cmd[@]}"
