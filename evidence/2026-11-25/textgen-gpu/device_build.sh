#!/usr/bin/env bash
# On the device machine (no network), in the repository root: the carried wheels, sources and the
# CUDA llama-server, and the TinyLlama-1.1B-shaped random model as a bf16 GGUF. Re-runs resume.
# Carried (git-ignored): .whl/ (cp312 wheels of the rig's and text-generation-webui's API's
# dependencies the machine lacks), .gpucarry/ (llama.cpp.tar.gz from scripts/build_llamacpp.sh
# --pack-source, textgen.tar.gz from build/textgen less its fonts and docs, site/llama_cpp_binaries.py).
set -uo pipefail
out=${OUT:-/tmp}
g=build/gpu
mkdir -p $g
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $g/site .whl/*.whl \
  || { echo "error: wheels did not install"; exit 3; }
cp .gpucarry/site/llama_cpp_binaries.py $g/site/
[[ -d $g/llama.cpp ]] || tar -C $g -xzf .gpucarry/llama.cpp.tar.gz
[[ -d $g/textgen ]] || tar -C $g -xzf .gpucarry/textgen.tar.gz
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt"; nproc >> "$out/gpu.txt"
gguf=models/tinyllama-1.1b.gguf
if [[ ! -s $gguf ]]; then
  ( python3 servers/vllm-cpu/tiny_model.py --shape tinyllama-1.1b models/tinyllama-1.1b \
    && python3 - $g/llama.cpp models/tinyllama-1.1b $gguf <<'PY'
import runpy, sys
src, model, out = sys.argv[1:]
sys.path[:0] = [src, src + "/gguf-py"]
from conversion.base import TextModel
TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"  # as scripts/build_llamacpp.sh does
sys.argv = ["convert_hf_to_gguf.py", model, "--outfile", out + ".tmp", "--outtype", "bf16"]
runpy.run_path(src + "/convert_hf_to_gguf.py", run_name="__main__")
PY
  ) > "$out/model.log" 2>&1 && mv $gguf.tmp $gguf &
fi
start=$SECONDS
scripts/build_llamacpp.sh --source $g/llama.cpp --cuda 90 > "$out/build.log" 2>&1
echo "build rc=$? in $((SECONDS - start)) s"
wait
ls -la build/llama.cpp/cuda-90/bin/llama-server $gguf
tail -3 "$out/build.log" "$out/model.log"
