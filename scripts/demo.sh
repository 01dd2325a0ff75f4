#!/usr/bin/env bash
# usage: scripts/demo.sh [--engines E[,E...]] [--out DIR] [--port P] [--engine-cpus L]
#          [--client-cpus L] [--no-pin] [USERS[,USERS...] [REQUESTS]] [-- RUN OPTIONS]
#   e.g. scripts/demo.sh --engines vllm-cpu,llamacpp-cpu 1,8,32,128 256
#   The first command from a fresh clone: installs the rig, the local engines and SmolLM2 (install.sh
#   --model smollm2), then races them with `rig race --answers 4` (python -m loadtest.race: every
#   argument is its; --answers 0: no answers); its help follows. Bad arguments are refused before
#   anything is installed, by the machine's python3 (standard library); --dry-run: the plan alone.
set -euo pipefail
cd "$(dirname "$0")/.."

race=(--answers 4)  # the demo's own, before the user's arguments: theirs win
python=.venv/bin/python  # before the install: any python3 can check the arguments
[[ -x $python ]] || python=${PYTHON:-python3}
for arg in "$@"; do
  [[ $arg != -- ]] || break
  if [[ $arg == -h || $arg == --help ]]; then
    sed -n '2,8s/^# \{0,1\}//p' "$0"
    echo
    exec "$python" -m loadtest.race --help
  fi
  # --dry-run: the plan, checked as below; nothing installed, nothing started
  [[ $arg != --dry-run ]] || exec "$python" -m loadtest.race "${race[@]}" "$@"
done
"$python" -m loadtest.race --dry-run "${race[@]}" "$@" > /dev/null  # bad input: one error line, exit 2

scripts/install.sh --model smollm2  # SmolLM2, a real model: the answers after the race
if [[ " $* " =~ [[:space:],=]textgen-cpu[[:space:],] ]]; then  # not in install.sh: asked for by name
  scripts/install_textgen.sh || echo "warning: text-generation-webui not installed: textgen-cpu will not run" >&2
fi
exec .venv/bin/python -m loadtest.race "${race[@]}" "$@"
