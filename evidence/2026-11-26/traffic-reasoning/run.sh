#!/usr/bin/env bash
# Does reasoning change the winner? vLLM CPU and llama.cpp CPU, both made to reason on the tiny
# model (tests/test_reasoning_engine.py: vLLM's hf parser and a response template; llama.cpp a
# chat template rendering reasoning in <think> and --reasoning-format deepseek), each answer held
# to <think>[a-z ]{16,40}</think>[a-z ]{4,20} (vLLM: the regex; llama.cpp: its GBNF twin), beside
# the same prompt unconstrained (--constrain off: no reasoning, 96 tokens). Then llama.cpp on the
# shipped regex set through its grammar twins, on and off. Each engine started with `rig engine
# start` (every core but the first; the client on the first), a warm-up, then at 1 and 8 users,
# two repeats, on and off in alternation, 10 s each (--duration). Writes OUT (default
# results/traffic-reasoning) and the report of it all.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROOT=$(realpath -m "${OUT:-results/traffic-reasoning}")
PORT=${PORT:-18760}
PID=$ROOT/engine.pid
TASKS=tests/data/reasoning-regex.jsonl
mkdir -p "$ROOT"

run() {  # USERS REPEAT CONSTRAINTS CONSTRAIN [OPTIONS...]
  .venv/bin/rig run --engine "$ENGINE" --host "http://127.0.0.1:$PORT" --api chat \
    --workload structured --constraints "$3" --constrain "$4" --users "$1" --requests 16 \
    --max-tokens 96 --telemetry-interval 0 --flags="$FLAGS" --tag reasoning --repeat "$2" \
    --out "$OUT" "${@:5}" > "$OUT/last.log" 2>&1 || { tail -20 "$OUT/last.log"; return 1; }
  grep -E "^verdict|^requests|^ttft|^ itl|^ttfa" "$OUT/last.log" | tr '\n' ' '; echo
}

measure() {  # CONSTRAINTS
  run 4 1 "$1" on --warmup; run 4 1 "$1" off --warmup
  for users in 1 8; do
    for repeat in 1 2; do
      for constrain in on off; do
        echo "== $ENGINE $1 constrain=$constrain users=$users repeat=$repeat"
        run "$users" "$repeat" "$1" "$constrain" --duration 10
      done
    done
  done
}

start() {  # ENGINE FLAGS...
  .venv/bin/rig engine start --engine "$1" --port "$PORT" --pidfile "$PID" --log "$OUT/$1.log" -- "${@:2}"
}
stop() { .venv/bin/rig engine stop --pidfile "$PID"; }
trap stop EXIT

OUT=$ROOT/vllm; mkdir -p "$OUT"
THINK=$ROOT/tiny-think
rm -rf "$THINK" && mkdir -p "$THINK"
for f in "$PWD"/models/tiny-llama/*; do
  [ "$(basename "$f")" = tokenizer_config.json ] || ln -s "$f" "$THINK/"
done
.venv/bin/python - "$THINK" <<'PY'
import json, sys
config = json.load(open("models/tiny-llama/tokenizer_config.json"))
config["response_template"] = {"version": 1, "start_anchor": "assistant: ", "fields": {
    "thinking": {"open": "<think>", "close": "</think>"}, "content": {}}}
json.dump(config, open(f"{sys.argv[1]}/tokenizer_config.json", "w"))
PY
ENGINE=vllm-cpu
FLAGS='--enforce-eager --model tiny-think --reasoning-parser hf --structured-outputs-config {"enable_in_reasoning":true}'
start vllm-cpu --enforce-eager --model "$THINK" --reasoning-parser hf \
  --structured-outputs-config '{"enable_in_reasoning":true}'
measure "$TASKS"
stop

OUT=$ROOT/llamacpp; mkdir -p "$OUT"
ENGINE=llamacpp-cpu
FLAGS='--chat-template-file think.jinja --reasoning-format deepseek'
start llamacpp-cpu --chat-template-file tests/data/think.jinja --reasoning-format deepseek
measure "$TASKS"
stop

OUT=$ROOT/llamacpp-regex; mkdir -p "$OUT"
FLAGS=''
start llamacpp-cpu
measure regex
stop
trap - EXIT
.venv/bin/rig report "$ROOT" --out "$ROOT/report" > "$ROOT/report.txt"
