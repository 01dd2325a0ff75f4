#!/usr/bin/env bash
# usage: scripts/install_inprocess.sh [ENGINE...]
#   Installs what the in-process engines need (python -m loadtest.inprocess), after
#   scripts/install.sh. ENGINE: transformers, vllm-offline, ctranslate2, llama-cpp-python
#   (default: all). Re-running reuses what is already there (seconds).
#   transformers, vllm-offline  nothing more: .venv-transformers and .venv-vllm (install.sh)
#   ctranslate2                 ctranslate2 (pyproject extra "ctranslate2", pinned there) in
#                               .venv-transformers, and the tiny model converted by its converter
#                               to models/ct2/tiny-llama-float32 and -int8
#   llama-cpp-python            the llama-cpp-python package (extra "llama-cpp-python") in .venv
#                               without its native build, on the shared libllama that
#                               scripts/build_llamacpp.sh links from llama-server's own build, in
#                               build/llama.cpp/cpu/bin (LLAMA_CPP_LIB_PATH points there)
set -euo pipefail
usage() { if [[ ${1:-2} == 0 ]]; then help; exit 0; fi; help >&2; exit 2; }
help() { sed -n '2,13s/^# \{0,1\}//p' "$0"; }
die() { echo "error: $*" >&2; exit 1; }
run() { echo "+ $*" >&2; "$@"; }
cd "$(dirname "$0")/.."

all=(transformers vllm-offline ctranslate2 llama-cpp-python)
engines=()
for arg in "$@"; do
  case $arg in
    -h|--help) usage 0 ;;
    transformers|vllm-offline|ctranslate2|llama-cpp-python) engines+=("$arg") ;;
    *) echo "error: unknown in-process engine '$arg' (one of: ${all[*]})" >&2; exit 2 ;;
  esac
done
[[ ${#engines[@]} -gt 0 ]] || engines=("${all[@]}")

# The pins live in pyproject.toml's extras, read from there (one place for each version).
extra() {
  python3 - "$1" <<'PY'
import re, sys, tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
print(" ".join(extras[sys.argv[1]]))
PY
}

install_ctranslate2() {
  local py=.venv-transformers/bin/python spec
  [[ -x $py ]] || die "no .venv-transformers: run scripts/install.sh first"
  spec=$(extra ctranslate2)
  if ! "$py" -c "import ctranslate2, sys; sys.exit(ctranslate2.__version__ != '${spec#*==}')" 2>/dev/null; then
    run .venv-transformers/bin/pip install -q "$spec"
  fi
  local type out
  for type in float32 int8; do
    out=models/ct2/tiny-llama-$type
    if [[ -s $out/model.bin && $out/model.bin -nt models/tiny-llama/model_sha256.txt ]]; then
      echo "ctranslate2 model: present at $out" >&2; continue
    fi
    [[ -f models/tiny-llama/model_sha256.txt ]] || die "no models/tiny-llama: run scripts/install.sh"
    rm -rf "$out"
    run "$py" -m loadtest.inprocess.ct2 models/tiny-llama "$type" 2>&1 | grep -v 'Loading weights' >&2 || true
    [[ -s $out/model.bin ]] || die "the CTranslate2 conversion to $out failed"
  done
}

install_llama_cpp_python() {
  local spec version sdist
  spec=$(extra llama-cpp-python); version=${spec#*==}
  [[ -x .venv/bin/python ]] || die "no .venv: run scripts/install.sh first"
  # The package alone: scikit-build-core told not to run CMake (wheel.cmake=false), from the
  # sdist that scripts/build_llamacpp.sh fetched and checked (its pinned sha256).
  if ! .venv/bin/python -c "import importlib.metadata as m, sys
sys.exit(m.version('llama_cpp_python') != '$version')" 2>/dev/null; then
    sdist=build/llama.cpp/sdist/llama_cpp_python-$version.tar.gz
    [[ -f $sdist ]] || die "no $sdist: run scripts/install.sh (scripts/build_llamacpp.sh fetches it)"
    run .venv/bin/pip install -q --no-cache-dir --config-settings=wheel.cmake=false "$sdist"
  fi
  # libllama: linked by the llama-server build from its own archives (compiled once); the
  # script returns at once when both are present.
  run scripts/build_llamacpp.sh --server-only
}

for engine in "${engines[@]}"; do
  case $engine in
    transformers) [[ -x .venv-transformers/bin/python ]] || die "no .venv-transformers: run scripts/install.sh" ;;
    vllm-offline) [[ -x .venv-vllm/bin/python ]] || die "no .venv-vllm: run scripts/install.sh" ;;
    ctranslate2) install_ctranslate2 ;;
    llama-cpp-python) install_llama_cpp_python ;;
  esac
done
