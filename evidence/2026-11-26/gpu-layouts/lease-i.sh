#!/usr/bin/env bash
# The four-GPU lease's runs, from a frozen copy of the tree in /tmp/rig/tree (after
# ../gpu-engines/host.sh's keep, install rig vllm, `model tinyllama-1.1b` steps, and nginx carried
# to /tmp/rig/nginx). In turn, each a cut of sweeps/gpu-vllm-layouts-4gpu.yaml (the client in
# four processes on cores 0-3, the engines and nginx on the rest):
#   4g       the 8B shape: four vLLMs, one per GPU, behind nginx; one vLLM over the four
#            (--tensor-parallel-size 4); two TP=2 vLLMs behind nginx; the fixed workload and the
#            prefill-heavy heat at 64, 256 and 512 users, two interleaved repeats
#   client1  the four replicas again at 512 users, fixed, with the client in one process: what
#            one client process would have said
#   1b       the three layouts with the TinyLlama-1.1B shape, fixed, 512 users, one repeat
set -u
cd /tmp/rig/tree
export RIG_NGINX=/tmp/rig/nginx/nginx
H=evidence/2026-11-26/gpu-engines/host.sh
M=/tmp/rig/models
/tmp/rig/engines/rig/python - <<'PY'
import yaml
matrix = yaml.safe_load(open("sweeps/gpu-vllm-layouts-4gpu.yaml"))
matrix["workload"].update(requests=1024, requests_per_user=6)   # runs of 5 s or more on four GPUs
matrix["workloads"]["prefill"].update(requests=512, requests_per_user=2)
matrix["users"] = [64, 256, 512]
matrix["health_timeout_s"] = 400
fixed_only = {k: v for k, v in matrix.items() if k != "workloads"}
cuts = {
    "4g": dict(matrix, repeats=2),
    "client1": dict(fixed_only, engines=matrix["engines"][:1], users=[512], repeats=1,
                    client_processes=1, name="gpu-vllm-layouts-4gpu-client1"),
    "1b": dict(fixed_only, users=[512], repeats=1),
}
for name, cut in cuts.items():
    yaml.safe_dump(cut, open(f"/tmp/rig/h-{name}.yaml", "w"), sort_keys=False)
PY
until grep -q MODEL-DONE /tmp/rig/model.log; do sleep 5; done
echo "8B model ready $(date -u +%T)"
bash $H rig sweep flags /tmp/rig/h-4g.yaml --out /tmp/rig/h-4g; echo "H4G-DONE rc=$? $(date -u +%T)"
bash $H rig sweep flags /tmp/rig/h-client1.yaml --out /tmp/rig/h-client1; echo "HC1-DONE rc=$? $(date -u +%T)"
until grep -q MODEL-tinyllama-1.1b-DONE /tmp/rig/model.log; do sleep 5; done
VLLM_MODEL=$M/tinyllama-1.1b VLLM_SERVED_MODEL_NAME=tinyllama-1.1b bash $H rig sweep flags /tmp/rig/h-1b.yaml \
  --out /tmp/rig/h-1b; echo "H1B-DONE rc=$? $(date -u +%T)"
