#!/usr/bin/env bash
# A four-GPU lease's runs, from a frozen copy of the tree in /tmp/rig/tree (after
# ../../2026-11-26/gpu-engines/host.sh's keep, install rig vllm, `model tinyllama-1.1b` steps,
# nginx carried to /tmp/rig/nginx). The question: on two GPUs, with as many API servers each
# way, which layout wins at the seed's thread counts (24-256 users), on long prompts, and with
# interleaved repeats? Earlier leases restarted a layout per repeat or ran its repeats back to
# back; here sweeps/gpu-vllm-layouts-2gpu-together.yaml starts both two-GPU layouts at once on
# GPUs 0,1 (one vLLM per GPU behind nginx) and 2,3 (TP=2 with --api-server-count 2) and
# measures them in turn, cell by cell, three repeats, the client in two processes on cores 0-1:
#   v8b  the 8B shape, the fixed workload and the prefill-heavy heat, 24/64/128/256 users
#   v1b  if the lease has time: the 1.1B shape, fixed, 64/128/256 users, two repeats (1,024
#        requests or 8 a user: the 1.1B shape streams ~2x the 8B's tok/s)
set -u
cd /tmp/rig/tree
export RIG_NGINX=/tmp/rig/nginx/nginx
H=evidence/2026-11-26/gpu-engines/host.sh
M=/tmp/rig/models
/tmp/rig/engines/rig/python - <<'PY'
import yaml
matrix = yaml.safe_load(open("sweeps/gpu-vllm-layouts-2gpu-together.yaml"))
fixed_only = {k: v for k, v in matrix.items() if k != "workloads"}
cuts = {
    "v8b": matrix,
    "v1b": dict(fixed_only, workload=dict(matrix["workload"], requests=1024),
                users=[64, 128, 256], repeats=2),
}
for name, cut in cuts.items():
    yaml.safe_dump(cut, open(f"/tmp/rig/h-{name}.yaml", "w"), sort_keys=False)
PY
nvidia-smi topo -m
until grep -q MODEL-DONE /tmp/rig/model.log; do sleep 5; done
echo "8B model ready $(date -u +%T)"
bash $H rig sweep flags /tmp/rig/h-v8b.yaml --out /tmp/rig/h-v8b; echo "HV8B-DONE rc=$? $(date -u +%T)"
until grep -q MODEL-tinyllama-1.1b-DONE /tmp/rig/model.log; do sleep 5; done
VLLM_MODEL=$M/tinyllama-1.1b VLLM_SERVED_MODEL_NAME=tinyllama-1.1b bash $H rig sweep flags \
  /tmp/rig/h-v1b.yaml --out /tmp/rig/h-v1b; echo "HV1B-DONE rc=$? $(date -u +%T)"
