#!/usr/bin/env bash
# usage: scripts/demo.sh [--engines E[,E...]] [--out DIR] [--port P] [--engine-cpus L]
#          [--client-cpus L] [--no-pin] [USERS[,USERS...] [REQUESTS]] [-- RUN OPTIONS]
#   e.g. scripts/demo.sh --engines vllm-cpu,llamacpp-cpu 1,8,32,128 256
#   The first command from a fresh clone: installs the rig and the local engines
#   (scripts/install.sh), then races them with `rig race` (python -m loadtest.race), which takes
#   every argument; its help follows. Bad arguments are refused before anything is installed,
#   by the machine's own python3 (standard library only); --dry-run prints the plan and stops there.
set -euo pipefail
cd "$(dirname "$0")/.."

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
  [[ $arg != --dry-run ]] || exec "$python" -m loadtest.race "$@"
done
"$python" -m loadtest.race --dry-run "$@" > /dev/null  # bad input: one error line, exit 2

scripts/install.sh
if [[ " $* " =~ [[:space:],=]textgen-cpu[[:space:],] ]]; then  # not in install.sh: asked for by name
  scripts/install_textgen.sh || echo "warning: text-generation-webui not installed: textgen-cpu will not run" >&2
fi
exec .venv/bin/python -m loadtest.race "$@"
