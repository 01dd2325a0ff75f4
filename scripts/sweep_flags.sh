#!/usr/bin/env bash
# usage: scripts/sweep_flags.sh MATRIX.yaml [--out results] [--dry-run] [--until-known [--max-repeats N]]
#   e.g. scripts/sweep_flags.sh sweeps/vllm-cpu-max-num-seqs.yaml
#        scripts/sweep_flags.sh sweeps/tgi-speculate.yaml --dry-run
#   For each engine configuration of the matrix (engines x flag values x GPU sets): start it
#   (Compose, or a local process for the embedded vllm-cpu engine), wait until healthy, warm up,
#   run the workload at each user count R times, record, stop it. The whole matrix is checked
#   before anything starts. Re-run to resume: measured cells are skipped. A configuration that
#   fails to start or crashes is recorded as failed with its log's tail, and the sweep goes on.
#   --dry-run prints every cell and command without starting anything (no GPU needed).
#   --until-known repeats a user count until one configuration leads it (sweeps/README.md).
set -euo pipefail
usage() { sed -n '2,11s/^# \{0,1\}//p' "$0"; }
[[ ${1:-} == -h || ${1:-} == --help ]] && { usage; exit 0; }
[[ $# -ge 1 && $1 != -* ]] || { echo "error: the first argument is the MATRIX file (see --help)" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
[[ -x $root/.venv/bin/python ]] || { echo "error: no $root/.venv: run scripts/install.sh" >&2; exit 2; }
[[ -f $1 ]] || { echo "error: no matrix file: $1" >&2; exit 2; }
cmd=("$root/.venv/bin/python" -m loadtest.sweep.flags "$@")
echo "+ ${cmd[*]}" >&2
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec "${cmd[@]}"
