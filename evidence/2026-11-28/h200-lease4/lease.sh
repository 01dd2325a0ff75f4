#!/usr/bin/env bash
# usage: evidence/2026-11-28/h200-lease4/lease.sh STEP  (a bare lent host with two H200s)
# A short fourth lease (issue 52), the functions of ../h200-lease3/lease.sh: SmolLM2's folder made
# on the host by the fixed servers/smollm2.py (its RoPE base and tokenizer class spelled for
# transformers 4 and 5), then at once on two GPUs:
#   lane A  GPU 0: vLLM bf16 without speculation, then Aphrodite bf16 on the same folder as made
#   lane B  GPU 1: vLLM fp8
# each on the story set at 1 and 64 users and the graded set at 1 and 64 users (greedy, answers
# kept). Steps: keep (as lease3's: carried parts in; the first call installs the rig and starts the
# lanes), wait N, fetch.
set -uo pipefail
L3=evidence/2026-11-28/h200-lease3/lease.sh
eval "$(sed -n '/^set -uo/,/^lane() {/p' $L3 | sed '$d')"

sets() {  # ENGINE PORT CONFIG
  for users in 1 64; do
    rig run --engine $1 --host http://127.0.0.1:$2 --users $users --requests $((users == 1 ? 32 : 1024)) --api chat \
      --prompts story --max-tokens 128 --temperature 0 --keep-outputs --telemetry-interval 2 --client-cpus $CLIENT \
      --gpu $GPU --tag $3-story-u$users --out $R/smollm2-$1 2>&1 | tail -3
    rig run --engine $1 --host http://127.0.0.1:$2 --users $users --requests $((users == 1 ? 278 : 2780)) --api chat \
      --workload structured --constraints graded --max-tokens 24 --temperature 0 --keep-outputs \
      --telemetry-interval 2 --client-cpus $CLIENT --gpu $GPU --tag $3-graded-u$users --out $R/smollm2-$1 2>&1 | tail -3
  done
}

serve() {  # ENGINE PORT CONFIG [SETTING=VALUE...]
  local engine=$1 port=$2 config=$3 prefix=${1^^}; shift 3
  install $engine && smollm2_made || return
  stamp "$engine $config start"
  env "$@" ${prefix}_MODEL=$SMOL ${prefix}_SERVED_MODEL_NAME=smollm2-135m ${prefix}_GPUS=$GPU rig engine start \
    --engine $engine --port $port --cpus $ENGINE --pidfile $W/$engine-$config.pid --log $R/$engine-$config.log \
    --timeout 300 || { tail -20 $R/$engine-$config.log; return 1; }
  sets $engine $port $config
  rig engine stop --pidfile $W/$engine-$config.pid; stamp "$engine $config done"
}

case ${1:?step} in
  keep)
    keep_parts
    if [[ ! -e $W/lanes.started ]]; then
      nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv | tee $R/gpu.csv
      install rig || exit 1
      half=$(( $(nproc) / 2 ))
      GPU=0 CLIENT=0,1 ENGINE=2-$((half - 1)) setsid nohup $0 lane A > $R/lane-A.log 2>&1 < /dev/null &
      GPU=1 CLIENT=$half,$((half + 1)) ENGINE=$((half + 2))-$(( $(nproc) - 1 )) setsid nohup $0 lane B \
        > $R/lane-B.log 2>&1 < /dev/null &
      touch $W/lanes.started; stamp lanes started
    fi ;;
  lane)
    export GPU CLIENT ENGINE CUDA_VISIBLE_DEVICES=$GPU; echo "lane $2: GPU $GPU, client $CLIENT, engine $ENGINE"
    case $2 in
      A) serve vllm 8000 none; grep -E '"(rope_theta|tokenizer_class)"' $SMOL/config.json $SMOL/tokenizer_config.json
         serve aphrodite 2242 none ;;
      B) serve vllm 8001 fp8 VLLM_QUANTIZE=fp8 ;;
    esac
    stamp "lane $2 finished"; touch $W/lane-$2.finished ;;
  wait) $L3 wait "${@:2}" ;;
  fetch) pack all; ls -la "$OUT" ;;
  *) echo "error: unknown step $1" >&2; exit 2 ;;
esac
