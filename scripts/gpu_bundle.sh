#!/usr/bin/env bash
# usage: scripts/gpu_bundle.sh describe|build|install ... (--help: every option)
# An engine's wheels for a GPU host with no network (servers/bundle/): `describe` on the host,
# `build` here (resolved by uv, installed into build/uv/ as scripts/venv.sh does, from pip's main
# index), `install` on the host with its own python3 and pip. docs/gpus.md says how.
set -euo pipefail
cd "$(dirname "$0")/.."
python=python3
[[ -x .venv/bin/python ]] && python=.venv/bin/python
if [[ ${1:-} == build ]]; then
  run() { "$@" >&2; }
  # shellcheck source=scripts/venv.sh
  source scripts/venv.sh
  uv_ready || { echo "error: scripts/gpu_bundle.sh build needs uv (build/uv/); see above" >&2; exit 2; }
  # pip's main index alone: its extra indexes, local wheels and constraints serve this
  # machine's own installs (a local index of cp311 wheels hid PyPI's cp312 triton from uv)
  index=$(pip_setting index-url)
  export RIG_UV=$PWD/$UV_HOME/bin/uv RIG_UV_SOURCES=${index:+--default-index=$index}
fi
exec "$python" -m servers.bundle "$@"
