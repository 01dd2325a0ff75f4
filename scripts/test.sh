#!/usr/bin/env bash
# usage: scripts/test.sh [PYTEST_ARGS...]
#   Installs what the tests need (the rig, the embedded vLLM CPU engine and its tiny model, the
#   in-process engines (scripts/install_inprocess.sh), and a real Docker engine with Compose v2
#   where one can start, with the images built locally) and runs every test, integration tests
#   against the real vLLM CPU server and real docker compose included. Without a Docker engine
#   the container tests are skipped, each with its reason.
#   .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
scripts/install_inprocess.sh
if scripts/docker_setup.sh; then
  scripts/build_images.sh vllm-cpu llamacpp-cpu nginx
else
  echo "warning: no Docker engine could start here; container tests will be skipped" >&2
fi
exec .venv/bin/python -m pytest -rs "$@"
