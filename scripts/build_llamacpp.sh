#!/usr/bin/env bash
# usage: scripts/build_llamacpp.sh [--rebuild] [--source DIR] [--server-only | --cuda ARCH | --pack-source DIR | --gguf MODEL OUT | --lora-gguf ADAPTER OUT]
#   Builds llama.cpp's real llama-server from the llama.cpp tree vendored in PyPI's
#   llama-cpp-python sdist (version pinned in servers/llamacpp_cpu.py), and converts
#   models/tiny-llama to models/tiny-llama.gguf. Re-runs reuse what is already built.
#   (default)         CPU build: Release, one static binary, no curl/OpenSSL, no web UI, only
#                     llama-server -> build/llama.cpp/cpu/bin/llama-server, and a
#                     shared libllama linked from the same build's archives (one link step, for
#                     the in-process llama-cpp-python engine) -> build/llama.cpp/cpu/bin/libllama.so,
#                     and llama-quantize beside them (servers/smollm2.py's Q4_K_M GGUF);
#                     then the GGUF (f32, converted with .venv-vllm's python and the vendored converter)
#   --server-only     the CPU build only, no GGUF (needs no venv: install.sh runs it beside pip)
#   --cuda ARCH       CUDA build instead (-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=ARCH, e.g. 90)
#                     -> build/llama.cpp/cuda-ARCH/bin/llama-server; no GGUF step
#   --pack-source DIR write the vendored tree, stripped to what the server build needs (CPU and
#                     CUDA backends only), to DIR, to carry to a machine with no network
#   --gguf MODEL OUT  only convert the model folder MODEL (e.g. tiny_model.py --shape llama3-8b's)
#                     to the GGUF file OUT in bf16, with the vendored converter; no build
#   --lora-gguf ADAPTER OUT  only convert a PEFT LoRA adapter folder (python -m servers.lora's)
#                     to the GGUF adapter OUT (f32) llama-server's --lora takes, against the base
#                     model its adapter_config.json names; no build
#   --source DIR      build from DIR (a tree written by --pack-source) instead of the sdist
#   --rebuild         rebuild the binary and the GGUF even if present
#   The sdist comes from `pip download --no-deps --no-binary :all: llama-cpp-python==VERSION`,
#   kept in build/llama.cpp/sdist/ (or LLAMACPP_SDIST=FILE) and checked against the sha256 pinned
#   there; RIG_ENGINE_PYTHON overrides the converter's python.
set -euo pipefail
usage() { if [[ ${1:-2} == 0 ]]; then help; exit 0; fi; help >&2; exit 2; }
help() { sed -n '2,28s/^# \{0,1\}//p' "$0"; }
die() { echo "error: $*" >&2; exit 1; }
run() { echo "+ $*" >&2; "$@"; }

root=$(cd "$(dirname "$0")/.." && pwd)
targets=(llama-server)
rebuild=0 server_only=0 cuda="" pack="" source="" gguf_model="" lora="" arch_re='^[0-9][0-9a-z;-]*$'
while [[ $# -gt 0 ]]; do
  case $1 in
    -h|--help) usage 0 ;;
    --rebuild) rebuild=1; shift ;;
    --server-only) server_only=1; shift ;;
    --cuda) [[ $# -ge 2 && $2 =~ $arch_re ]] || die "--cuda takes an architecture, e.g. --cuda 90"
            cuda=$2; shift 2 ;;
    --pack-source) [[ $# -ge 2 && -n $2 ]] || die "--pack-source takes a folder"; pack=$2; shift 2 ;;
    --gguf) [[ $# -ge 3 && -f $2/config.json && -n $3 ]] || die "--gguf takes a model folder (with config.json) and a GGUF file"
            gguf_model=$(cd "$2" && pwd) gguf_out=$3; shift 3 ;;
    --lora-gguf) [[ $# -ge 3 && -f $2/adapter_config.json && -n $3 ]] || die "--lora-gguf takes an adapter folder (with adapter_config.json) and a GGUF file"
            lora=$(cd "$2" && pwd) lora_out=$3; shift 3 ;;
    --source) [[ $# -ge 2 && -d $2 ]] || die "--source takes an existing folder"; source=$(cd "$2" && pwd); shift 2 ;;
    *) echo "error: unknown argument: $1" >&2; usage ;;
  esac
done
[[ -n $cuda && -n $pack ]] && die "--cuda and --pack-source are separate runs"
[[ -n $gguf_model && ( -n $cuda || -n $pack ) ]] && die "--gguf is a run of its own"
[[ -n $lora && ( -n $cuda || -n $pack || -n $gguf_model ) ]] && die "--lora-gguf is a run of its own"

read -r version sdist_sha256 < <(cd "$root" && python3 -c \
  'from servers.llamacpp_cpu import LLAMA_CPP_PYTHON_VERSION as v, LLAMA_CPP_PYTHON_SHA256 as s; print(v, s)')
work=$root/build/llama.cpp
model_dir=$root/models/tiny-llama
gguf=$root/models/tiny-llama.gguf
python=${RIG_ENGINE_PYTHON:-$root/.venv-vllm/bin/python}

fetch_source() {  # unpack the sdist's vendor/llama.cpp into $work/src (once per version)
  [[ -n $source ]] && return
  source=$work/src
  [[ -f $source/.sdist-$version ]] && return
  local sdist=${LLAMACPP_SDIST:-$work/sdist/llama_cpp_python-$version.tar.gz}
  if [[ ! -f $sdist ]]; then
    mkdir -p "$work/sdist"
    run python3 -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work/sdist" \
      || die "could not download the llama-cpp-python $version sdist; put it at $sdist or set LLAMACPP_SDIST"
  fi
  echo "$sdist_sha256  $sdist" | sha256sum -c --quiet - >&2 \
    || die "$sdist is not the llama-cpp-python $version sdist (sha256 differs from servers/llamacpp_cpu.py)"
  rm -rf "$source"; mkdir -p "$source"
  echo "unpacking vendor/llama.cpp from $sdist" >&2
  tar -xzf "$sdist" -C "$source" --strip-components=3 "llama_cpp_python-$version/vendor/llama.cpp"
  touch "$source/.sdist-$version"
}

build_server() {  # $1: build folder; the rest: extra cmake options; $targets: what to build
  local dir=$1 bin=$1/bin/llama-server target; shift
  if [[ $rebuild == 0 && -x $bin ]] && configured_with "$dir" "$@"; then
    echo "llama-server: present at $bin" >&2
    for target in "${targets[@]:1}"; do  # a tool added to the build since: built alone, seconds
      [[ -x $dir/bin/$target ]] || run cmake --build "$dir" --target "$target" -j "$(nproc)"
    done
    return
  fi
  fetch_source
  local start=$SECONDS
  # llama.cpp's CMake compiles through ccache where it is installed (GGML_CCACHE); paths made
  # relative to the checkout let another clone on this machine reuse its objects.
  export CCACHE_BASEDIR=$root
  # Tools on (the server lives under tools/), but only the targets asked for are built.
  # No web UI: neither npm nor a download of the prebuilt one; the API is all the rig uses.
  run cmake -S "$source" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF "$@"
  run cmake --build "$dir" --target "${targets[@]}" -j "$(nproc)"
  echo "llama-server: built in $((SECONDS - start)) s at $bin ($(du -h "$bin" | cut -f1))" >&2
  if command -v ccache >/dev/null; then ccache --show-stats 2>/dev/null | grep -iE '^ *(hits|misses)' >&2 || true; fi
}

configured_with() {  # $1: build folder; the rest: -DNAME=VALUE options its CMake cache must hold
  local dir=$1 opt; shift
  for opt in "$@"; do
    opt=${opt#-D}
    grep -q "^${opt%%=*}:[A-Z]*=${opt#*=}\$" "$dir/CMakeCache.txt" 2>/dev/null || return 1
  done
}

link_libllama() {  # $1: the CPU build folder; its llama and ggml archives -> one shared libllama
  local dir=$1 lib=$1/bin/libllama.so cxx archive archives=()
  if [[ $lib -nt $dir/bin/llama-server ]]; then echo "libllama: present at $lib" >&2; return; fi
  for archive in src/libllama.a ggml/src/libggml.a ggml/src/libggml-cpu.a ggml/src/libggml-base.a; do
    [[ -f $dir/$archive ]] || die "no $dir/$archive: rebuild with scripts/build_llamacpp.sh --rebuild"
    archives+=("$dir/$archive")
  done
  cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt")
  # The archives are compiled position-independent (see the CPU build below), so the very
  # objects llama-server is linked from make the library; OpenMP comes in as the shared libgomp.
  # -z defs: an unresolved symbol fails here, not when llama-cpp-python loads the library.
  run "$cxx" -shared -o "$lib.tmp" -Wl,-soname,libllama.so -Wl,-z,defs \
    -Wl,--whole-archive "${archives[@]}" -Wl,--no-whole-archive -fopenmp -lpthread -ldl -lm
  mv "$lib.tmp" "$lib"
  echo "libllama: linked at $lib ($(du -h "$lib" | cut -f1))" >&2
}

convert_model() {  # [MODEL OUT TYPE]: models/tiny-llama (bf16 safetensors) -> models/tiny-llama.gguf (f32)
  local model_dir=${1:-$model_dir} gguf=${2:-$gguf} outtype=${3:-f32}
  if [[ $rebuild == 0 && -s $gguf && $gguf -nt $model_dir/model_sha256.txt ]]; then
    echo "GGUF: present at $gguf" >&2; return
  fi
  [[ -f $model_dir/model_sha256.txt ]] || die "no model at $model_dir: run scripts/install.sh"
  [[ -x $python ]] || die "no converter python at $python (torch, transformers): run scripts/install.sh"
  fetch_source
  # The converter knows pre-tokenizers by a hash of their output and refuses ours (trained
  # here). It is a byte-level BPE with GPT-2's split regex (tiny_model.py), so it is "gpt-2";
  # patched in memory, the vendored files stay as they are.
  run "$python" - "$source" "$model_dir" "$gguf" "$outtype" <<'PY'
import runpy, sys
src, model, out, outtype = sys.argv[1:]
sys.path[:0] = [src, src + "/gguf-py"]
from conversion.base import TextModel
TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
sys.argv = ["convert_hf_to_gguf.py", model, "--outfile", out + ".tmp", "--outtype", outtype]
runpy.run_path(src + "/convert_hf_to_gguf.py", run_name="__main__")
PY
  mv "$gguf.tmp" "$gguf"
  echo "GGUF: written to $gguf ($(du -h "$gguf" | cut -f1))" >&2
}

convert_lora() {  # ADAPTER OUT: a PEFT adapter -> a GGUF adapter, base from its adapter_config.json
  local adapter=$1 out=$2 base
  [[ -x $python ]] || die "no converter python at $python (torch, transformers): run scripts/install.sh"
  base=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["base_model_name_or_path"])' "$adapter/adapter_config.json")
  [[ -f $base/config.json ]] || die "$adapter: its base model $base has no config.json here"
  fetch_source
  run "$python" - "$source" "$adapter" "$base" "$out" <<'PY'
import runpy, sys
src, adapter, base, out = sys.argv[1:]
sys.path[:0] = [src, src + "/gguf-py"]
sys.argv = ["convert_lora_to_gguf.py", adapter, "--base", base, "--outfile", out + ".tmp", "--outtype", "f32"]
runpy.run_path(src + "/convert_lora_to_gguf.py", run_name="__main__")
PY
  mv "$out.tmp" "$out"
  echo "LoRA GGUF: written to $out" >&2
}

pack_source() {  # the server build's inputs only: no models, docs, tests, examples, UI sources
  fetch_source
  local out=$1/llama.cpp
  [[ -e $out ]] && die "$out exists; remove it first"
  mkdir -p "$out"
  tar -C "$source" -cf - \
    --exclude=./models --exclude=./docs --exclude=./media --exclude=./tests --exclude=./examples \
    --exclude=./pocs --exclude=./benches --exclude=./.devops --exclude=./.github --exclude=./ci \
    --exclude=./tools/ui --exclude=./tools/server/tests --exclude=./tools/server/bench --exclude=./skills \
    --exclude='./ggml/src/ggml-'{blas,cann,et,hexagon,hip,metal,musa,opencl,openvino,rpc,sycl,virtgpu,vulkan,webgpu,zdnn,zendnn} \
    . | tar -C "$out" -xf -
  mkdir -p "$out/tools/ui"  # the UI's web sources stay behind: built with LLAMA_BUILD_UI=OFF
  cp "$source"/tools/ui/{CMakeLists.txt,sources.cmake,ui.cpp.in,ui.h.in} "$out/tools/ui/"
  touch "$out/.sdist-$version"
  echo "packed source: $out ($(du -sh "$out" | cut -f1)); build it with: scripts/build_llamacpp.sh --source $out --cuda ARCH" >&2
}

if [[ -n $lora ]]; then
  convert_lora "$lora" "$lora_out"
elif [[ -n $gguf_model ]]; then
  convert_model "$gguf_model" "$gguf_out" bf16
elif [[ -n $pack ]]; then
  pack_source "$pack"
elif [[ -n $cuda ]]; then
  build_server "$work/cuda-$cuda" -DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$cuda" -DGGML_NATIVE=ON
else
  # One binary: llama, ggml and OpenMP linked in statically (GGML_STATIC); only glibc and
  # libstdc++ stay shared. Tuned for this machine's CPU (-march=native). Position-independent
  # code, so that the same archives also link into libllama.so: llama.cpp is compiled once.
  targets+=(llama-quantize)
  build_server "$work/cpu" -DGGML_STATIC=ON -DGGML_NATIVE=ON -DCMAKE_POSITION_INDEPENDENT_CODE=ON
  link_libllama "$work/cpu"
  [[ $server_only == 1 ]] || convert_model
fi
