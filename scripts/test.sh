#!/usr/bin/env bash
# usage: scripts/test.sh [PYTEST_ARGS...]
#   Installs what the tests need (the rig, the embedded vLLM CPU engine, its tiny model, and a
#   Docker engine where one can start) and runs them all, including integration tests against
#   the real vLLM CPU server. .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
.venv/bin/python -m pytest "$@"
