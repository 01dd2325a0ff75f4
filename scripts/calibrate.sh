#!/usr/bin/env bash
# usage: scripts/calibrate.sh [--quick] [--users 1,32,128,512] [--processes 1,2,4,8] [--requests 8]
#          [--ttft-ms 50] [--gap-ms 20] [--tokens 64] [--api completions|chat|generate]
#          [--out results/calibration] [--python PY] [--pacer-cores 0-4] [--client-cores 5-15]
#          [--pacer-workers N] [--worker-hosts 1,2,4 [--cores-per-host 1]]
#   How much streamed load this client measures faithfully. Starts the pacing server
#   (loadtest/calibration/pacer.py: tokens on an exact schedule) pinned to its own cores, drives
#   it with the real rig pinned to the others at each process count (default: 1,2,4,8 that fit the
#   client's cores) and users per process, and prints per setting: the client's TTFT and ITL error net
#   of the pacer's own timing (p50/p99 ms), events/s per process, client CPU peak, and whether it
#   was faithful (within 1 ms p50 / 2 ms p99). Writes OUT/<hostname>-<ncpu>cpu.json (the limit
#   per process count; loadtest/calibration/limits.py reads it). --users counts users per client
#   process (total = users x processes), --requests answers per user.
#   --quick: 1,32,256 users, 2 answers of 32 tokens (under a minute on 2 cores).
#   --worker-hosts: the client as a master and that many workers, each a host of its own (a
#   network namespace; root only) on cores of its own; --users per host; OUT/...-hosts.json.
#   Python: $RIG_PYTHON, else .venv/bin/python, else python3 (Locust runs as PY -m locust, or as
#   $LOCUST). Exit: 0 done, 2 bad option or the rig/pacer could not run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
for arg in "$@"; do
  [[ $arg == -h || $arg == --help ]] && { sed -n '2,20s/^# \{0,1\}//p' "$0"; exit 0; }
done
python=${RIG_PYTHON:-}
if [[ -z $python ]]; then
  if [[ -x $root/.venv/bin/python ]]; then python=$root/.venv/bin/python; else python=python3; fi
fi
cd "$root"
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m loadtest.calibration.calibrate "$@"
