#!/usr/bin/env bash
# usage: scripts/install_textgen.sh [--transformers | --pack DIR | --requirements | --into DIR]
#   Makes the textgen-cpu engine: text-generation-webui's API (server.py --nowebui --api) at
#   commit 1dcde41d03d1, unpacked under build/textgen/ from the vendored source tarball
#   (TEXTGEN_TARBALL, default ../shared/vendor/; else cloned from its public git repository),
#   and .venv-textgen with its PyPI dependencies (requirements/portable/requirements_nowheels.txt
#   less the GitHub wheels: no Gradio, no llama.cpp binaries) plus a llama_cpp_binaries shim
#   that hands it the rig's own build/llama.cpp/cpu/bin/llama-server (RIG_LLAMA_SERVER at run
#   time overrides it). --transformers adds its Transformers loader on CPU torch.
#   --pack DIR fills an image's build context instead (servers/textgen-cpu): DIR/src/ (the
#   source and requirements-api.txt), DIR/bin/llama-server and DIR/site/: .venv-textgen's
#   installed packages when its Python is the image's (3.11, Debian bookworm), so the image
#   reuses them instead of running pip (left empty otherwise); no venv is made.
#   --requirements prints the API's PyPI requirements (what `scripts/gpu_bundle.sh build textgen`
#   bundles for a host with no network). --into DIR, on such a host: the source under build/textgen/
#   and the shim written into DIR, where `scripts/gpu_bundle.sh install ... --name textgen --target
#   DIR` put the requirements (run it with RIG_TEXTGEN_PYTHON=DIR/python); no venv, no pip.
#   Re-running reuses what is there.
set -euo pipefail
[[ ${1:-} != -h && ${1:-} != --help ]] || { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0; }
usage() { sed -n '2,15s/^# \{0,1\}//p' "$0" >&2; exit 2; }
pack="" into=""
case "${1:-}" in
  "" | --transformers | --requirements) [[ $# -le 1 ]] || usage ;;
  --pack) [[ $# -eq 2 ]] || usage; pack=$2 ;;
  --into) [[ $# -eq 2 ]] || usage; into=$2 ;;
  *) usage ;;
esac
cd "$(dirname "$0")/.."

COMMIT=1dcde41d03d13fc768316f4d2256a8a6dd044268
TARBALL_SHA256=aceec451f2e952c2c0e533fbbc8ce5a20341e6d72771c51e30d5cc949c015218
TARBALL=${TEXTGEN_TARBALL:-../shared/vendor/text-generation-webui-${COMMIT:0:12}.tar.gz}
GIT_URL=${TEXTGEN_GIT_URL:-https://github.com/oobabooga/text-generation-webui}
SOURCE=build/textgen
VENV=.venv-textgen
python=${PYTHON:-python3}
torch_spec="torch==2.13.0+cpu"  # the rig's CPU torch (scripts/install.sh)
# The Transformers loader's own pins at this commit (requirements/full/requirements_nowheels.txt).
transformers_specs=("transformers==5.6.*" "accelerate==1.13.*" "safetensors==0.7.*" sentencepiece)

run() { echo "+ $*" >&2; "$@"; }
fail() { echo "error: $*" >&2; exit 1; }
source scripts/venv.sh  # make_venv, venv_install: through uv where it can be had, else pip

# The source, once: the tarball checked against its digest, else a clone of the pinned commit.
unpack_source() {
  [[ $(cat "$SOURCE/.commit" 2>/dev/null) == "$COMMIT" ]] && return
  local tmp="$SOURCE.tmp"
  if [[ -f $TARBALL ]] && ! echo "$TARBALL_SHA256  $TARBALL" | sha256sum -c --status; then
    fail "$TARBALL is not text-generation-webui ${COMMIT:0:12} (its sha256 differs): fetch it again, or remove it to clone the commit instead"
  fi
  rm -rf "$tmp" && mkdir -p "$tmp"
  if [[ -f $TARBALL ]]; then
    tar -xzf "$TARBALL" -C "$tmp" --strip-components=1
  elif ! { GIT_TERMINAL_PROMPT=0 timeout 300 git clone -q --filter=blob:none --no-checkout "$GIT_URL" "$tmp" \
           && git -C "$tmp" checkout -q "$COMMIT"; } 2>/dev/null; then
    rm -rf "$tmp"
    fail "no text-generation-webui source: put its tarball at $TARBALL (or set TEXTGEN_TARBALL), or let git reach $GIT_URL"
  fi
  rm -rf "$SOURCE" && mv "$tmp" "$SOURCE"
  echo "$COMMIT" > "$SOURCE/.commit"
}

# The API's PyPI requirements: every line but the wheels it fetches from GitHub (Gradio and
# llama.cpp's binaries), plus Pillow, which its API imports without saying so.
api_requirements() {
  grep -v -e '^https://' -e '^#' -e '^[[:space:]]*$' "$SOURCE/requirements/portable/requirements_nowheels.txt"
  echo "Pillow>=9.5.0"
}

# A venv's site-packages.
purelib() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

# llama_cpp_binaries is how modules/llama_cpp_server.py finds llama-server; this one-module
# package, written into the venv, finds the rig's build, so textgen and the bare llamacpp-cpu
# engine run the same binary.
install_shim() {
  local site=$1
  cat > "$site/llama_cpp_binaries.py" <<EOF
"""llm-load-rig's llama-server for text-generation-webui (RIG_LLAMA_SERVER overrides it)."""
import os


def get_binary_path() -> str:
    return os.environ.get("RIG_LLAMA_SERVER", "$PWD/build/llama.cpp/cpu/bin/llama-server")
EOF
}

# The rig's CPU torch where .venv-transformers holds it (scripts/install.sh), for the same Python:
# hard links to its installed files instead of pip unpacking the 190 MB wheel again (minutes on
# 2 cores), so pip finds it installed and adds only what is missing. Each venv stays its own: pip
# replacing torch in one unlinks that venv's names only. Anything else: pip installs it.
link_torch() {
  local from=.venv-transformers from_site site name
  [[ -x $from/bin/python && ! -e $(purelib "$VENV")/torch ]] || return 0
  [[ $("$from/bin/python" -V) == $("$VENV/bin/python" -V) ]] || return 0
  from_site=$(purelib "$from") site=$(purelib "$VENV")
  local record=$from_site/${torch_spec/==/-}.dist-info/RECORD
  [[ -f $record ]] || return 0
  echo "+ hard-linking $torch_spec from $from" >&2
  for name in $(cut -d, -f1 "$record" | grep -v '^\.\./' | cut -d/ -f1 | sort -u); do
    cp -al "$from_site/$name" "$site/" || { echo "warning: could not link $name; pip installs torch" >&2; return 0; }
  done
}

# An image's build context: the source, its API's requirements and the rig's llama-server.
pack_context() {
  local llama_server=build/llama.cpp/cpu/bin/llama-server
  [[ -x $llama_server ]] || fail "no $llama_server: run scripts/build_llamacpp.sh first"
  rm -rf "$pack/src" && mkdir -p "$pack/bin" && cp -r "$SOURCE" "$pack/src"
  api_requirements > "$pack/src/requirements-api.txt"
  cp "$llama_server" "$pack/bin/llama-server"
  pack_site
  echo "textgen-cpu build context: $pack (src/, bin/llama-server, site/: $(ls "$pack/site" | wc -l) entries)" >&2
}

# The venv's packages for the image, where they were installed for its Python (cp311 wheels);
# the Transformers loader's torch and its kin stay out: the image serves the llama.cpp loader.
pack_site() {
  local site
  rm -rf "$pack/site" && mkdir -p "$pack/site"
  [[ -x $VENV/bin/python ]] || return 0
  [[ $("$VENV/bin/python" -c 'import sys; print(sys.version_info[:2] == (3, 11))') == True ]] || return 0
  [[ -n $(ls "$VENV"/.installed-* 2>/dev/null) ]] || return 0
  site=$(purelib "$VENV")
  tar -C "$site" -cf - --exclude='./torch*' --exclude='./nvidia*' --exclude='./triton*' \
    --exclude='./transformers*' --exclude='./accelerate*' --exclude='./__pycache__' --exclude='./pip' \
    --exclude='./pip-*' --exclude='./llama_cpp_binaries.py' . | tar -C "$pack/site" -xf -
}

unpack_source
if [[ -n $pack ]]; then pack_context; exit 0; fi
if [[ ${1:-} == --requirements ]]; then api_requirements; exit 0; fi
if [[ -n $into ]]; then
  [[ -x $into/python ]] || fail "no $into/python: install the textgen bundle there first (scripts/gpu_bundle.sh install FOLDER --name textgen --target $into)"
  install_shim "$into"
  echo "textgen installed: $SOURCE (commit ${COMMIT:0:12}), its requirements and shim in $into: run it with RIG_TEXTGEN_PYTHON=$into/python" >&2
  exit 0
fi
make_venv "$VENV"
stamp="$VENV/.installed-$({ api_requirements; cat "$0"; } | sha256sum | cut -c1-16)"
if [[ ! -f $stamp ]]; then
  # pip's resolver needs the index: say so in one line after its own log.
  venv_install "$VENV" -r <(api_requirements) \
    || fail "pip could not install text-generation-webui's API requirements into $VENV: check that the package index is reachable, then re-run $0"
  install_shim "$(purelib "$VENV")"
  rm -f "$VENV"/.installed-* && touch "$stamp"
fi
if [[ $* == --transformers ]] && ! "$VENV/bin/python" -c 'import torch, transformers, accelerate' 2>/dev/null; then
  link_torch
  venv_install "$VENV" "$torch_spec" "${transformers_specs[@]}" \
    || venv_install "$VENV" "$torch_spec" "${transformers_specs[@]}" --extra-index-url https://download.pytorch.org/whl/cpu \
    || fail "pip could not install the Transformers loader (CPU torch) into $VENV: check the package index, then re-run $0 --transformers"
fi
echo "textgen-cpu installed: $SOURCE (commit ${COMMIT:0:12}), $VENV" >&2
