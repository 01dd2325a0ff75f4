#!/usr/bin/env bash
# usage: evidence/2026-11-26/gpu-engines/host.sh STEP [ARGS]  (on the GPU host, repository root)
# What ran on the bare GPU host, one step per device call. Each call carried one part of a
# bundle (scripts/gpu_bundle.sh build ... --part-mib 50) under build/bundles/ or the llama.cpp
# tree under build/llama-src/; `keep` moves them out of the working tree the next call replaces.
#   keep                  parts, trees and tarballs that arrived, to /tmp/rig
#   install NAME...       scripts/gpu_bundle.sh install of each bundle, into /tmp/rig/engines/NAME
#                         (textgen: and its source, scripts/install_textgen.sh --into)
#   binout / binin        the CUDA llama-server, xz'd into $OUT in 15 MiB pieces / restored from
#                         them (a later lease skips the 6-minute build)
#   model [SHAPE...]      the Llama-3-8B-shaped model, then each SHAPE (tinyllama-1.1b), in the background
#                         (VLLM_MODEL/APHRODITE_MODEL and their served names, if set, pick another)
#   llamacpp              the CUDA llama-server (unless binin restored it) and the 8B GGUF, in the background
#   rig ARGS...           rig ARGS with the engines' settings below
#   bg NAME rig ARGS...   the same in the background (its log: /tmp/rig/NAME.log)
#   wait SECONDS PATTERN  until /tmp/rig/*.log shows PATTERN, at most SECONDS; then each log's end
set -euo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export W=/tmp/rig B=/tmp/rig/bundles T=/tmp/rig/engines M=/tmp/rig/models
mkdir -p $B $T $M
# the engines' settings, as the local recipes read them (servers/vllm.py gpu_recipe, llamacpp)
export RIG_VLLM_PYTHON=$T/vllm/python RIG_APHRODITE_PYTHON=$T/aphrodite/python
export VLLM_MODEL=${VLLM_MODEL:-$M/llama3-8b} VLLM_SERVED_MODEL_NAME=${VLLM_SERVED_MODEL_NAME:-llama3-8b}
export APHRODITE_MODEL=${APHRODITE_MODEL:-$M/llama3-8b} APHRODITE_SERVED_MODEL_NAME=${APHRODITE_SERVED_MODEL_NAME:-llama3-8b}
export RIG_LLAMACPP_MODEL=$M/llama3-8b.gguf
export RIG_TRANSFORMERS_PYTHON=$T/transformers/python RIG_TRANSFORMERS_DEVICE=cuda RIG_TRANSFORMERS_MODEL=$M/llama3-8b
export RIG_TEXTGEN_PYTHON=$T/textgen/python
LLAMA_BIN=build/llama.cpp/cuda-90/bin/llama-server
rig() { "$T/rig/python" -m loadtest.cli.main "$@"; }

case ${1:?step} in
  keep)
    shopt -s nullglob
    for f in build/bundles/* build/text-generation-webui-*.tar.gz build/llama-server.xz.*; do mv -f "$f" $B/; done
    [[ -d build/llama-src ]] && { rm -rf $W/llama-src; mv build/llama-src $W/llama-src; }
    ls -la $B; df -h /tmp | tail -1 ;;
  install)
    shift
    for name in "$@"; do
      scripts/gpu_bundle.sh install $B --name "$name" --target "$T/$name"
      if [[ $name == textgen ]]; then
        TEXTGEN_TARBALL=$(ls $B/text-generation-webui-*.tar.gz) scripts/install_textgen.sh --into "$T/textgen"
      fi
    done ;;
  binout)
    xz -T0 -3 -c $LLAMA_BIN | split -b 15M -d - "$OUT/llama-server.xz."; ls -la "$OUT" ;;
  binin)
    mkdir -p "$(dirname $LLAMA_BIN)" && cat $B/llama-server.xz.* | xz -d > $LLAMA_BIN && chmod +x $LLAMA_BIN
    ls -la $LLAMA_BIN ;;
  model)  # model [SHAPE...]: the 8B shape, then each SHAPE (tinyllama-1.1b) into $M/SHAPE
    shift; more=""
    for shape in "$@"; do more+=" && python3 servers/vllm-cpu/tiny_model.py --shape $shape $M/$shape && echo MODEL-$shape-DONE"; done
    setsid nohup bash -c "python3 servers/vllm-cpu/tiny_model.py --shape llama3-8b $M/llama3-8b &&
      echo MODEL-DONE$more" > $W/model.log 2>&1 < /dev/null & ;;
  llamacpp)
    setsid nohup bash -c "{ [[ -x $LLAMA_BIN ]] || scripts/build_llamacpp.sh --source $W/llama-src/llama.cpp --cuda 90; } &&
      while [[ ! -f $M/llama3-8b/config.json ]]; do sleep 5; done &&
      RIG_ENGINE_PYTHON=$(command -v python3) scripts/build_llamacpp.sh --source $W/llama-src/llama.cpp --gguf $M/llama3-8b $M/llama3-8b.gguf && echo LLAMACPP-DONE" \
      > $W/llamacpp.log 2>&1 < /dev/null & ;;
  rig) shift; rig "$@" ;;
  bg)
    name=$2; shift 3
    setsid nohup bash -c "$(declare -f rig); $(printf '%q ' rig "$@"); echo \"$name-DONE rc=\$?\"" \
      > "$W/$name.log" 2>&1 < /dev/null & ;;
  wait)
    deadline=$((SECONDS + $2))
    until grep -q "$3" $W/*.log 2>/dev/null || (( SECONDS > deadline )); do sleep 5; done
    for log in $W/*.log; do echo "== $log"; tail -n 15 "$log"; done
    nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv ;;
  *) echo "error: unknown step $1" >&2; exit 2 ;;
esac
