#!/usr/bin/env bash
# A four-GPU lease's runs, from a frozen copy of the tree in /tmp/rig/tree (after
# ../../2026-11-26/gpu-engines/host.sh's keep, install rig vllm, `model tinyllama-1.1b` steps,
# nginx carried to /tmp/rig/nginx). The question: on four GPUs, with as many API servers each
# way as the four replicas have, does one-per-GPU still win? Lease I (2026-11-26) set four
# replicas (four API servers) against TP=4 and two TP=2 servers with one API server each.
# One cut of sweeps/gpu-vllm-layouts-4gpu.yaml, each layout started once and its repeats run
# back to back (a start takes minutes; the lease has 30), the client in four processes on
# cores 0-3, the engines and nginx on the rest:
#   v8b  the 8B shape, the fixed workload and the prefill-heavy heat at 64, 256 and 512 users,
#        two repeats: four replicas behind nginx; TP=4 with --api-server-count 4; two TP=2
#        servers with --api-server-count 2 each behind nginx; --data-parallel-size 4
#   v1b  if the lease has time: the 1.1B shape, fixed, 512 users, two repeats, four replicas
#        and TP=4 with four API servers
set -u
cd /tmp/rig/tree
export RIG_NGINX=/tmp/rig/nginx/nginx
H=evidence/2026-11-26/gpu-engines/host.sh
M=/tmp/rig/models
/tmp/rig/engines/rig/python - <<'PY'
import yaml
matrix = yaml.safe_load(open("sweeps/gpu-vllm-layouts-4gpu.yaml"))
matrix.update(health_timeout_s=600, interleave_repeats=False, users=[64, 256, 512], repeats=2)
fixed_only = {k: v for k, v in matrix.items() if k != "workloads"}
replicas, tp4, tp2x2, tp2x2_api2, dp4, tp4_api4 = matrix["engines"]
cuts = {
    "v8b": dict(matrix, engines=[replicas, tp4_api4, tp2x2_api2, dp4]),
    "v1b": dict(fixed_only, engines=[replicas, tp4_api4], users=[512]),
}
for name, cut in cuts.items():
    yaml.safe_dump(cut, open(f"/tmp/rig/h-{name}.yaml", "w"), sort_keys=False)
PY
until grep -q MODEL-DONE /tmp/rig/model.log; do sleep 5; done
echo "8B model ready $(date -u +%T)"
bash $H rig sweep flags /tmp/rig/h-v8b.yaml --out /tmp/rig/h-v8b; echo "HV8B-DONE rc=$? $(date -u +%T)"
until grep -q MODEL-tinyllama-1.1b-DONE /tmp/rig/model.log; do sleep 5; done
VLLM_MODEL=$M/tinyllama-1.1b VLLM_SERVED_MODEL_NAME=tinyllama-1.1b bash $H rig sweep flags \
  /tmp/rig/h-v1b.yaml --out /tmp/rig/h-v1b; echo "HV1B-DONE rc=$? $(date -u +%T)"
