#!/usr/bin/env bash
# usage: scripts/build_exl3_ext.sh [--python PY] [--arch LIST] [--jobs N]
# exllamav3's CUDA extension compiled here, ahead of time, as a wheel for a GPU host that then
# imports it instead of compiling it on first import (258 s on an H200, most of a lease).
#   --python PY  the host's Python version (the module is built for one ABI; default python3.12)
#   --arch LIST  the host's GPUs' compute capabilities, TORCH_CUDA_ARCH_LIST's form (default 9.0)
#   --jobs N     compiles at once (default 2)
# The build venv (build/exl3/venv, from PY) holds the lent hosts' torch and exllamav3's sources
# from the package index; the wheel lands in build/exl3/ (exllamav3_ext-VERSION-cpXY-...whl),
# where `scripts/gpu_bundle.sh build exllamav3` takes it. Needs nvcc of the host's CUDA major
# version (CUDA_HOME, default /usr/local/cuda). 194 translation units (the H200 JIT-compiles them in 258 s with 16 jobs; a re-run resumes).
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "error: $*" >&2; exit 2; }
python=python3.12 arch=9.0 jobs=2
while (($#)); do
  case $1 in
    --python|--arch|--jobs) (($# >= 2)) || fail "$1 needs a value"; declare "${1#--}=$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) fail "unknown option '$1' (--help lists them)" ;;
  esac
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || fail "--jobs takes a positive count, not '$jobs'"
[[ $arch =~ ^[0-9]+\.[0-9]+a?(\+PTX)?(\;[0-9]+\.[0-9]+a?(\+PTX)?)*$ ]] \
  || fail "--arch takes compute capabilities like 9.0 or \"8.9;9.0+PTX\", not '$arch'"
[[ -n $python ]] && command -v "$python" >/dev/null && "$python" -c 'import sys' 2>/dev/null \
  || fail "--python '$python' does not run"
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
[[ -x $CUDA_HOME/bin/nvcc ]] || fail "no nvcc at $CUDA_HOME/bin (set CUDA_HOME)"

# The lent hosts' torch (docs/gpus.md) and the bundle's exllamav3 (servers/bundle/recipes.py)
torch_pin=torch==2.11.0
exl3_pin=$(.venv/bin/python -c 'from servers.bundle.recipes import RECIPES; print(RECIPES["exllamav3"].requirements[0])')
venv=build/exl3/venv
[[ -x $venv/bin/python ]] || "$python" -m venv "$venv"
"$venv/bin/pip" install -q "$torch_pin" numpy ninja setuptools wheel
"$venv/bin/pip" install -q --no-deps "$exl3_pin"  # its sources only; nothing of it is imported

TORCH_CUDA_ARCH_LIST=$arch MAX_JOBS=$jobs PATH=$CUDA_HOME/bin:$PATH \
  "$venv/bin/python" scripts/build_exl3_ext.py build/exl3/ext
