#!/usr/bin/env bash
# A two-GPU lease's runs, from a frozen copy of the tree in /tmp/rig/tree (after
# ../../2026-11-26/gpu-engines/host.sh's keep, install rig aphrodite, `model tinyllama-1.1b`
# steps, nginx carried to /tmp/rig/nginx), once the calibration from worker hosts
# (../distributed-capacity/) has finished: the machine's cores are the engines' and client's alone.
# In turn, each a cut of sweeps/gpu-vllm-layouts-2gpu.yaml (the client in two processes on cores
# 0-1, the engines and nginx on the rest):
#   aph8b  the 8B shape: one Aphrodite per GPU behind nginx, one Aphrodite over both GPUs
#          (--tensor-parallel-size 2); the fixed workload at 24, 64, 128 and 256 users (the seed's
#          thread counts; 640 requests or 8 a user), two interleaved repeats
#   aph1b  the same two layouts with the TinyLlama-1.1B shape, fixed, 64 and 256 users, one repeat
set -u
cd /tmp/rig/tree
export RIG_NGINX=/tmp/rig/nginx/nginx
H=evidence/2026-11-26/gpu-engines/host.sh
M=/tmp/rig/models
/tmp/rig/engines/rig/python - <<'PY'
import yaml
matrix = yaml.safe_load(open("sweeps/gpu-vllm-layouts-2gpu.yaml"))
matrix["health_timeout_s"] = 400
matrix["workload"].update(requests=640)  # at 24 users: ~20 s a run, not ~40; 64 users still over 5 s
aphrodite = [e for e in matrix["engines"] if e["engine"] == "aphrodite"]
fixed_only = {k: v for k, v in matrix.items() if k != "workloads"}
cuts = {
    "aph8b": dict(fixed_only, engines=aphrodite, repeats=2),
    "aph1b": dict(fixed_only, engines=aphrodite, users=[64, 256], repeats=1),
}
for name, cut in cuts.items():
    yaml.safe_dump(cut, open(f"/tmp/rig/h-{name}.yaml", "w"), sort_keys=False)
PY
until [[ -f /tmp/rig/cal.done ]]; do sleep 5; done
until grep -q MODEL-DONE /tmp/rig/model.log; do sleep 5; done
echo "8B model ready, calibration done $(date -u +%T)"
bash $H rig sweep flags /tmp/rig/h-aph8b.yaml --out /tmp/rig/h-aph8b; echo "HAPH8B-DONE rc=$? $(date -u +%T)"
until grep -q MODEL-tinyllama-1.1b-DONE /tmp/rig/model.log; do sleep 5; done
APHRODITE_MODEL=$M/tinyllama-1.1b APHRODITE_SERVED_MODEL_NAME=tinyllama-1.1b bash $H rig sweep flags \
  /tmp/rig/h-aph1b.yaml --out /tmp/rig/h-aph1b; echo "HAPH1B-DONE rc=$? $(date -u +%T)"
