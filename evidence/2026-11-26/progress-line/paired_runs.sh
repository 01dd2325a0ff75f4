#!/usr/bin/env bash
# usage: evidence/2026-11-26/progress-line/paired_runs.sh URL OUT PAIRS
#   e.g. evidence/2026-11-26/progress-line/paired_runs.sh http://127.0.0.1:18733 /tmp/pl 5
#   Runs against the pacer (python -m loadtest.calibration.pacer --ttft-ms 20 --gap-ms 5) in
#   pairs, alternating which goes first: the progress line every 0.1 s (50 times the default
#   rate) against none (--progress-interval 0); each run's client figures from runs.csv.
set -euo pipefail
[[ $# -eq 3 ]] || { sed -n '2,3s/^# \{0,1\}//p' "$0" >&2; exit 2; }
url=$1 out=$2 pairs=$3
cd "$(dirname "$0")/../../.."
run() {  # $1: interval, $2: the run's results folder
  .venv/bin/python -m locust -f loadtest/engines.py --headless --host "$url" --users 16 \
    --engine vllm --model pacer --requests 400 --max-tokens 32 --ignore-eos \
    --telemetry-interval 0 --out "$2" --progress-interval "$1" > "$2.log" 2>&1
}
for i in $(seq 1 "$pairs"); do
  if (( i % 2 )); then run 0.1 "$out/on"; run 0 "$out/off"; else run 0 "$out/off"; run 0.1 "$out/on"; fi
done
for side in on off; do
  echo "== $side"
  .venv/bin/python - "$out/$side/runs.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for col in ("client_cpu_mean_pct", "client_cpu_max_pct", "loop_lag_p99_ms", "ttft_p50_ms",
            "ttft_p99_ms", "output_tok_per_s"):
    values = [float(r[col]) for r in rows]
    print(f"{col:22} median {statistics.median(values):8.2f}  runs {' '.join(f'{v:.2f}' for v in values)}")
PY
done
