#!/usr/bin/env bash
# A two-GPU lease's runs, from a frozen copy of the tree in /tmp/rig/tree (after
# ../../2026-11-26/gpu-engines/host.sh's keep, install rig vllm, `model tinyllama-1.1b` steps,
# nginx carried to /tmp/rig/nginx). The question: the one vLLM over both GPUs stopped at
# 10,700-16,700 tok/s at 256 users; is that its one API-server process or its one engine core?
# vLLM now starts through `serve` (servers/vllm.py), which honours --api-server-count.
# In turn, each a cut of sweeps/gpu-vllm-layouts-2gpu.yaml (the client in four processes on
# cores 0-3, the engines and nginx on the rest), each layout started once, its repeats
# back to back (starts take minutes; the lease has 30):
#   v8b  the 8B shape, 64 and 256 users, two repeats: TP=2; TP=2 with --api-server-count 2;
#        --data-parallel-size 2 (an engine core a GPU, two API servers, vLLM balancing); one
#        vLLM per GPU behind nginx
#   v1b  the 1.1B shape, 256 users, three repeats: one vLLM per GPU behind nginx, the same with
#        --api-server-count 2 each; TP=2; TP=2 with --api-server-count 2
set -u
cd /tmp/rig/tree
export RIG_NGINX=/tmp/rig/nginx/nginx
H=evidence/2026-11-26/gpu-engines/host.sh
M=/tmp/rig/models
/tmp/rig/engines/rig/python - <<'PY'
import yaml
matrix = yaml.safe_load(open("sweeps/gpu-vllm-layouts-2gpu.yaml"))
matrix.update(health_timeout_s=600, client_processes=4, interleave_repeats=False)
fixed_only = {k: v for k, v in matrix.items() if k != "workloads"}
vllm = [e for e in matrix["engines"] if e["engine"] == "vllm"]
replicas, tp2, tp2_api2, replicas_api2, dp2 = vllm
cuts = {
    "v8b": dict(fixed_only, engines=[tp2, tp2_api2, dp2, replicas], users=[64, 256], repeats=2),
    "v1b": dict(fixed_only, engines=[replicas, replicas_api2, tp2, tp2_api2], users=[256], repeats=3),
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
