#!/usr/bin/env bash
# usage: scripts/install_peers.sh [aiperf] [guidellm]
#   Makes the peer benchmark tools `rig peers run` drives, each in its own virtual environment
#   from PyPI (pip's configured index): .venv-aiperf (aiperf==0.13.0) and .venv-guidellm
#   (guidellm==0.8.1); with no argument, both. `vllm bench serve` needs no install: it is
#   vLLM's own, in .venv-vllm (scripts/install.sh). Re-running reuses a venv that already has
#   the pinned version. Nothing is installed into .venv or .venv-vllm.
set -euo pipefail
[[ ${1:-} != -h && ${1:-} != --help ]] || { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0; }
usage() { sed -n '2,7s/^# \{0,1\}//p' "$0" >&2; exit 2; }
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
declare -A PINS=([aiperf]="aiperf==0.13.0" [guidellm]="guidellm==0.8.1")

peers=("$@")
[[ ${#peers[@]} -gt 0 ]] || peers=(aiperf guidellm)
for peer in "${peers[@]}"; do
  [[ -n ${PINS[$peer]:-} ]] || usage
done

for peer in "${peers[@]}"; do
  venv=".venv-$peer" pin=${PINS[$peer]}
  version=${pin#*==}
  installed=""
  [[ -x $venv/bin/python ]] && installed=$("$venv/bin/python" -m pip show "$peer" 2>/dev/null || true)
  if [[ $installed == *$'\n'"Version: $version"$'\n'* ]]; then
    echo "$venv: $pin already installed" >&2
    continue
  fi
  echo "+ $python -m venv $venv && $venv/bin/pip install $pin" >&2
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet "$pin"
  echo "$venv: $pin installed" >&2
done
