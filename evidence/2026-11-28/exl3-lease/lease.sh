#!/usr/bin/env bash
# usage: evidence/2026-11-28/exl3-lease/lease.sh   (one device call on a bare lent H200, repo root)
# Issue 51's ExLlamaV3 lease, every step a command of docs/gpus.md, each with its own time limit,
# the whole within LEASE_S (default 430) seconds (the session had 445 s of device time left):
#   1. the bundle parts carried in build/carry/ (the rig's, and exllamav3's built
#      --without-prebuilt: the extension's build here had done 20 of 194 units when the lease
#      began) to /tmp/rig/bundles, then `scripts/gpu_bundle.sh install` of both; exllamav3's
#      extension compiled on the host (TORCH_CUDA_ARCH_LIST=9.0, MAX_JOBS=16) and the built
#      module packed into $OUT (a later lease carries it prebuilt); meanwhile the host's python3
#      draws a random Llama of TinyLlama-1.1B's shape (servers/vllm-cpu/tiny_model.py)
#   2. scripts/convert_exl3.sh: that model to EXL3 at 4.0 bits, the time printed (calibration
#      16 x 512: random weights, measured for speed only)
#   3. exllamav3 in-process: `rig latency` (one user) and `rig inprocess` at 4, 16 and 64
#   4. the same for transformers in-process (`transformers-generate:cuda`) on the bf16 weights
# 200 output tokens a request throughout. Everything goes to /tmp/rig/out (console.log, runs.csv
# and each run's records, latency.md, nvidia-smi's memory each second), packed into
# $OUT/exl3-lease.tar.xz after every step, so a call cut short keeps what was done.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
LEASE_S=${LEASE_S:-430}
W=${RIG_LEASE_DIR:-/tmp/rig} M=${RIG_LEASE_DIR:-/tmp/rig}/models R=${RIG_LEASE_DIR:-/tmp/rig}/out
HF=$M/tinyllama-1.1b EXL3=$M/tinyllama-1.1b-exl3-4.0
mkdir -p $W/bundles $M $R
exec > >(tee -a $R/console.log) 2>&1
export PATH=$W/rig/bin:$PATH RIG_LATENCY_INSTALLED=1  # the bundles are the installs
export RIG_EXLLAMAV3_PYTHON=$W/exllamav3/python RIG_EXLLAMAV3_MODEL=$EXL3
export RIG_TRANSFORMERS_PYTHON=$(command -v python3) RIG_TRANSFORMERS_MODEL=$HF

stamp() { echo "== $* $(date -u +%T) (+${SECONDS}s)"; }
save() { tar -C $W -cf - out | xz -T0 -3 > "$OUT/exl3-lease.tar.xz.tmp" && mv "$OUT/exl3-lease.tar.xz.tmp" "$OUT/exl3-lease.tar.xz"; }
# step LIMIT_S CMD...: CMD under `timeout`, never past the lease's end (10 s kept to pack)
step() {
  local limit=$1 left=$((LEASE_S - 10 - SECONDS)); shift
  ((left < limit)) && limit=$left
  if ((limit < 5)); then echo "** skipped, no time left: $*"; return 124; fi
  echo "+ (limit ${limit}s) $*"
  timeout -k 5 "$limit" "$@"; local rc=$?
  echo "rc=$rc after ${SECONDS}s: $*"; save; return $rc
}

stamp start
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $R/gpu.csv
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,nounits -l 1 > $R/nvidia-smi.csv 2>&1 &
smi=$!
trap 'kill $smi 2>/dev/null; [[ -n ${model:-} ]] && kill -- -$model 2>/dev/null; save' EXIT

# 1. bundles (a part too large for one call came as halves NAME.h0, NAME.h1) and the model
mv -f build/carry/* $W/bundles/
for h1 in $W/bundles/*.h1; do
  [[ -e $h1 && -e ${h1%.h1}.h0 ]] && cat "${h1%.h1}.h0" "$h1" > "${h1%.h1}" && rm -f "${h1%.h1}.h0" "$h1"
done
ls -la $W/bundles
stamp model-draw
setsid bash -c "timeout 150 python3 servers/vllm-cpu/tiny_model.py --shape tinyllama-1.1b $HF; echo model rc=\$?" \
  > $R/model.log 2>&1 < /dev/null &
model=$!  # its own process group, stopped with the script
step 60 scripts/gpu_bundle.sh install $W/bundles --name rig --target $W/rig || exit 1
step 90 scripts/gpu_bundle.sh install $W/bundles --name exllamav3 --target $W/exllamav3 || exit 1
# the extension compiled here, on first import, into TORCH_EXTENSIONS_DIR; then packed into $OUT
stamp compile
# a build killed earlier (a step's timeout) leaves torch's lock file in the build folder, and the
# next import waits on it for ever: nothing else builds here, so it is stale
rm -f $W/exllamav3/torch_extensions/*/lock
step 320 env TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 $RIG_EXLLAMAV3_PYTHON -c 'import time; t = time.time()
import exllamav3.ext as e; print("exllamav3_ext", getattr(getattr(e, "exllamav3_ext", None), "__file__", "?"), "in %.1f s" % (time.time() - t))' || exit 1
(cd $W/exllamav3 && find torch_extensions -name '*.so' -o -name build.ninja | tar -cf - -T - | xz -T0 -3 > "$OUT/exllamav3-torch-extensions.tar.xz")
ls -la "$OUT"
wait $model; cat $R/model.log
[[ -f $HF/model_sha256.txt ]] || { echo "** no model"; exit 1; }

# 2. EXL3 at 4.0 bits
stamp convert
step 150 scripts/convert_exl3.sh $HF $EXL3 4.0 16 512
[[ -f $EXL3/config.json ]] && du -sh $HF $EXL3

# 3. exllamav3, 4. transformers, interleaved by what matters most if time runs out: one user
# (rig latency), then 16, 64 and 4 at once, each batch its own run with enough requests to last
# past the rig's 5-second floor (short_run)
exl3_batch() { step 40 rig inprocess exllamav3 --batch $1 --requests $2 --max-tokens 200 \
  --gpu H200 --tag batches --out $R; }
hf_batch() { step 40 rig inprocess transformers-generate:cuda --batch $1 --requests $2 \
  --max-tokens 200 --gpu H200 --tag batches --out $R; }
if [[ -f $EXL3/config.json ]]; then
  stamp exllamav3-1
  step 40 rig latency exllamav3 --repeats 1 --requests 16 --max-tokens 200 --gpu H200 --out $R
fi
stamp transformers-1
step 50 rig latency transformers-generate:cuda --repeats 1 --requests 8 --max-tokens 200 --gpu H200 --out $R
if [[ -f $EXL3/config.json ]]; then
  stamp exllamav3-batches
  exl3_batch 16 160
  exl3_batch 64 384
fi
stamp transformers-batches
hf_batch 16 32
[[ -f $EXL3/config.json ]] && exl3_batch 4 48
hf_batch 64 64
stamp done
