#!/usr/bin/env bash
# usage: evidence/2026-11-28/gpu-measurer/lease.sh STEP  (on a bare lent GPU host, repository root)
# Issue 50's lease, one step per device call, every engine and rig step a command of docs/gpus.md:
#   keep     the bundle parts carried in build/carry/ (this call's share), to /tmp/rig/bundles
#   install  `scripts/gpu_bundle.sh install` of the rig and vLLM (docs/gpus.md step 4); the
#            1.1B and 8B shapes drawn in the background
#   bench    vLLM on the 1.1B shape (front end saturated at 256 users): `rig bench` at 256 users,
#            the rig beside the lean client, alternated, with the rig's telemetry off as a third
#            client; then the same with the rig in two processes on two cores (the engine on
#            cores 2-15 for both)
#   doc8b    docs/gpus.md's own example as written (8B shape, 128 users) on this card, then the
#            same run with --processes 2 beside it (engine on 1-15): which cores the row names
#   telemetry  the 1.1B shape again: rig bench, six rounds, the rig with and without telemetry
#   fetch    what the steps left, packed into $OUT
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=/tmp/rig M=/tmp/rig/models
mkdir -p $W/bundles $M
export PATH=$W/rig/bin:$PATH RIG_VLLM_PYTHON=$W/vllm/python
stamp() { echo "== $* $(date -u +%T)"; }

case ${1:?step} in
  keep)  # a part too large to travel with the tree came as halves NAME.h0, NAME.h1
    mv -f build/carry/* $W/bundles/
    for h1 in $W/bundles/*.h1; do
      [[ -e $h1 && -e ${h1%.h1}.h0 ]] && cat "${h1%.h1}.h0" "$h1" > "${h1%.h1}" && rm -f "${h1%.h1}.h0" "$h1"
    done
    ls -la $W/bundles ;;
  install)
    stamp install
    scripts/gpu_bundle.sh install $W/bundles --name rig --target $W/rig || exit 1
    scripts/gpu_bundle.sh install $W/bundles --name vllm --target $W/vllm || exit 1
    setsid nohup bash -c "$RIG_VLLM_PYTHON servers/vllm-cpu/tiny_model.py --shape tinyllama-1.1b $M/tinyllama-1.1b &&
      echo MODEL-1B-DONE && $RIG_VLLM_PYTHON servers/vllm-cpu/tiny_model.py --shape llama3-8b $M/llama3-8b &&
      echo MODEL-8B-DONE" > $W/model.log 2>&1 < /dev/null &
    stamp installed ;;
  bench)
    until grep -q MODEL-1B-DONE $W/model.log; do sleep 2; done
    stamp vllm-1b-start
    VLLM_MODEL=$M/tinyllama-1.1b VLLM_SERVED_MODEL_NAME=tinyllama-1.1b VLLM_GPUS=0 \
      rig engine start --engine vllm --port 8000 --cpus 2-15 --pidfile $W/vllm.pid || exit 1
    rig engine list
    stamp bench-1proc
    rig bench --url http://127.0.0.1:8000 --engine vllm --users 256 --rounds 4 --requests 2048 \
      --max-tokens 128 --untelemetered-rig --client-cpus 0 --gpu 0 --out $W/bench-1proc
    stamp bench-2proc
    # the engine keeps cores 2-15 for this one: both clients get cores 0-1
    rig bench --url http://127.0.0.1:8000 --engine vllm --users 256 --rounds 3 --requests 2048 \
      --max-tokens 128 --rig-processes 2 --client-cpus 0,1 --gpu 0 --out $W/bench-2proc
    rig engine stop --pidfile $W/vllm.pid
    stamp bench-done ;;
  doc8b)
    until grep -q MODEL-8B-DONE $W/model.log; do sleep 2; done
    stamp vllm-8b-start
    VLLM_MODEL=$M/llama3-8b VLLM_GPUS=0 VLLM_MAX_CONCURRENT_REQUESTS=256 \
      rig engine start --engine vllm --port 8000 --pidfile /tmp/vllm.pid || exit 1
    rig run --engine vllm --users 128 --requests 2048 --ignore-eos --out $W/doc8b
    stamp processes-2  # beside the engine on cores 1-15, as the doc starts it
    rig run --engine vllm --users 128 --requests 2048 --ignore-eos --processes 2 --out $W/processes
    rig engine stop --pidfile /tmp/vllm.pid
    stamp doc8b-done ;;
  telemetry)  # the rig with and without its telemetry beside the reference, six rounds
    stamp vllm-1b-start
    VLLM_MODEL=$M/tinyllama-1.1b VLLM_SERVED_MODEL_NAME=tinyllama-1.1b VLLM_GPUS=0 \
      rig engine start --engine vllm --port 8000 --cpus 2-15 --pidfile $W/vllm.pid || exit 1
    stamp bench-telemetry
    rig bench --url http://127.0.0.1:8000 --engine vllm --users 256 --rounds 6 --requests 2048 \
      --max-tokens 128 --untelemetered-rig --client-cpus 0 --gpu 0 --out $W/bench-telemetry
    rig engine stop --pidfile $W/vllm.pid
    cd $W && tar -cf - bench-telemetry | xz -T0 -6 > "$OUT/bench-telemetry.tar.xz"
    stamp telemetry-done ;;
  fetch)
    cd $W && tar -cf - bench-1proc bench-2proc processes doc8b model.log 2>/dev/null \
      | xz -T0 -6 > "$OUT/gpu-measurer.tar.xz"; ls -la "$OUT" ;;
  *) echo "error: unknown step $1" >&2; exit 2 ;;
esac
