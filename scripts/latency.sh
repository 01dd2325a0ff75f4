#!/usr/bin/env bash
# usage: scripts/latency.sh [--out DIR] [--requests N] [--repeats R] [--max-tokens M] [--port P]
#          [--engine-cpus L] [--gpu G] ENGINE...
#   e.g. scripts/latency.sh vllm-cpu llamacpp-cpu vllm-offline transformers-generate ctranslate2:int8
#   The comparison studies' preset: one user, a warm-up excluded, the short mixed prompts, M
#   output tokens (default 200, exactly: --ignore-eos, or the engine's own equivalent), N requests
#   (default 18: each prompt twice) repeated R times (default 3), tagged latency, over servers
#   and in-process engines alike. Prints the studies' table (platform, options, gpu, avg tok/s,
#   avg time, avg output tokens) with the distribution of per-request tok/s, and writes it to
#   DIR/latency.md with DIR/latency.png (DIR defaults to results/latency; a re-run adds runs).
#   ENGINE: a local server (a RECIPE in servers/<slug>.py: vllm-cpu, llamacpp-cpu, transformers, ...), started
#     on 127.0.0.1:P (default 8000), measured by the rig's client, then stopped; or an in-process
#     engine ENGINE[:VARIANT] (python -m loadtest.inprocess --help lists them: vllm-offline,
#     transformers-generate[:streamer], ctranslate2[:float32|:int8], llama-cpp-python).
#   Engines run on the cores --engine-cpus names (default: all but the first), the servers'
#   client on the rest, as scripts/demo.sh lays them out. Installs what they need first
#   (scripts/install.sh, scripts/install_inprocess.sh).
#   Exit: 0 every engine ran every request, 1 an engine could not run or requests failed (the
#   others still run), 2 bad arguments.
set -euo pipefail
usage() { sed -n '2,20s/^# \{0,1\}//p' "$0"; }
die() { echo "error: $*" >&2; exit 2; }
cd "$(dirname "$0")/.."

out=results/latency requests=18 repeats=3 max_tokens=200 port=8000 engine_cpus="" gpu=""
engines=()
while [[ $# -gt 0 ]]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --out|--requests|--repeats|--max-tokens|--port|--engine-cpus|--gpu)
      [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value (see --help)"
      case $1 in
        --out) out=$2 ;; --requests) requests=$2 ;; --repeats) repeats=$2 ;;
        --max-tokens) max_tokens=$2 ;; --port) port=$2 ;; --engine-cpus) engine_cpus=$2 ;;
        --gpu) gpu=$2 ;;
      esac
      shift 2 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) engines+=("$1"); shift ;;
  esac
done
[[ ${#engines[@]} -gt 0 ]] || die "name at least one ENGINE (see --help)"
for pair in "--requests:$requests" "--repeats:$repeats" "--max-tokens:$max_tokens" "--port:$port"; do
  [[ ${pair#*:} =~ ^[1-9][0-9]*$ ]] || die "${pair%%:*} must be a positive integer, got '${pair#*:}'"
done
(( port <= 65535 )) || die "--port must be a port number, got '$port'"
[[ $(printf '%s\n' "${engines[@]}" | sort | uniq -d) == "" ]] || die "an ENGINE is named twice"
[[ $out == -* ]] && die "--out needs a folder"

# Each engine is a local server or an in-process engine; asked before installing anything.
servers=$("${PYTHON:-python3}" -c 'from servers.local import LOCAL; print(" ".join(LOCAL))')
installs=()
for engine in "${engines[@]}"; do
  if [[ " $servers " == *" $engine "* ]]; then continue; fi
  "${PYTHON:-python3}" -c 'import sys
from loadtest.inprocess.engines import SpecError, parse_spec
try:
    parse_spec(sys.argv[1])
except SpecError as exc:
    sys.exit(f"error: {exc}; or a local server: {sys.argv[2]}")' "$engine" "${servers// /, }" || exit 2
  slug=${engine%%:*}
  installs+=("${slug/transformers-generate/transformers}")
done
layout=$("${PYTHON:-python3}" -m loadtest.cpus --engine "$engine_cpus" 2>&1) || die "${layout#error: }"
read -r engine_cpus client_cpus <<< "$layout"
pin_client=() pin_engine=()
if [[ $engine_cpus != - ]]; then pin_engine=(--engine-cpus "$engine_cpus"); else engine_cpus=""; fi
if [[ $client_cpus != - ]]; then pin_client=(--client-cpus "$client_cpus"); fi

scripts/install.sh
if [[ ${#installs[@]} -gt 0 ]]; then scripts/install_inprocess.sh "${installs[@]}"; fi
mkdir -p "$out"
pidfile=$out/.engine.pid
stop_engine() {
  if [[ -f $pidfile ]]; then .venv/bin/python -m loadtest.local_engine stop --pidfile "$pidfile"; fi
}
trap stop_engine EXIT
trap 'exit 130' INT TERM

status=0
locust() {  # one run of the locustfile: `rig run` (loadtest/cli/run.py) builds its command
  local cmd=(.venv/bin/python -m loadtest.cli.main run "${pin_client[@]}" --engine "$engine"
             --host "http://127.0.0.1:$port" --prompts mixed --users 1
             --max-tokens "$max_tokens" --ignore-eos --out "$out" ${gpu:+--gpu "$gpu"}
             ${engine_cpus:+"--flags=--cpus $engine_cpus"} "$@" -- --only-summary)
  echo "+ ${cmd[*]}" >&2
  "${cmd[@]}"
}
for engine in "${engines[@]}"; do
  echo "== $engine" >&2
  if [[ " $servers " != *" $engine "* ]]; then
    cmd=(.venv/bin/python -m loadtest.inprocess "$engine" --batch 1 --requests "$requests"
         --max-tokens "$max_tokens" --repeats "$repeats" --warmup-requests 2 --tag latency
         --out "$out" "${pin_engine[@]}" ${gpu:+--gpu "$gpu"})
    [[ -n $engine_cpus ]] || cmd+=(--no-pin)
    echo "+ ${cmd[*]}" >&2
    code=0; "${cmd[@]}" || code=$?
    if [[ $code -ne 0 ]]; then echo "** $engine: exit $code; the others go on" >&2; status=1; fi
    continue
  fi
  if ! .venv/bin/python -m loadtest.local_engine start --engine "$engine" --port "$port" \
         --pidfile "$pidfile" --log "$out/engine-$engine.log" ${engine_cpus:+--cpus "$engine_cpus"}; then
    echo "** $engine did not start (log: $out/engine-$engine.log); the others go on" >&2
    status=1; continue
  fi
  code=0
  locust --requests 4 --warmup > "$out/warmup-$engine.log" 2>&1 || code=$?
  for repeat in $(seq 1 "$repeats"); do
    [[ $code -le 1 ]] || break
    locust --requests "$requests" --tag latency --repeat "$repeat" || code=$?
  done
  if [[ $code -ne 0 ]]; then echo "** $engine: exit $code; the others go on" >&2; status=1; fi
  stop_engine
done

.venv/bin/python -m loadtest.inprocess.latency "$out" --tag latency --md "$out/latency.md" \
  --png "$out/latency.png" || status=1
exit "$status"
