#!/usr/bin/env bash
# The second two-GPU lease's runs, from a frozen copy of the tree in /tmp/rig/tree (after
# ../gpu-engines/host.sh's keep, install rig vllm, `model tinyllama-1.1b` steps, and nginx carried
# to /tmp/rig/nginx). In turn, each a cut of sweeps/gpu-vllm-layouts-2gpu.yaml:
#   8b     the 8B shape: one vLLM per GPU behind nginx, one vLLM over both GPUs
#          (--tensor-parallel-size 2), and that one with two API-server processes
#          (--api-server-count 2); the fixed workload and the prefill-heavy heat, 64 and 256 users,
#          two interleaved repeats
#   1b     the same three layouts with the TinyLlama-1.1B shape, the fixed workload, one repeat
#   aph    Aphrodite per GPU against Aphrodite over both GPUs, 8B, fixed, one repeat, if its
#          bundle was installed by then (/tmp/rig/engines/aphrodite/python)
#   1b-r2  the 1.1B cut's second repeat
set -u
cd /tmp/rig/tree
export RIG_NGINX=/tmp/rig/nginx/nginx
H=evidence/2026-11-26/gpu-engines/host.sh
M=/tmp/rig/models
/tmp/rig/engines/rig/python - <<'PY'
import yaml
matrix = yaml.safe_load(open("sweeps/gpu-vllm-layouts-2gpu.yaml"))
matrix["workload"].update(requests=1024, requests_per_user=8)   # runs of 5 s or more on two GPUs
matrix["workloads"]["prefill"].update(requests=512, requests_per_user=2)
matrix["users"] = [64, 256]
matrix["health_timeout_s"] = 300
vllm = [e for e in matrix["engines"] if e["engine"] == "vllm"]
tp_api2 = {"engine": "vllm", "launch": "local", "gpus": ["0,1"],
           "settings": {"SHARDS": 2, "EXTRA_ARGS": "--api-server-count 2"}}
layouts = [vllm[0], vllm[1], tp_api2]
fixed_only = {k: v for k, v in matrix.items() if k != "workloads"}
cuts = {
    "8b": dict(matrix, engines=layouts, repeats=2),
    "1b": dict(fixed_only, engines=layouts, repeats=1),
    "aph": dict(fixed_only, engines=[e for e in matrix["engines"] if e["engine"] == "aphrodite"], repeats=1),
}
for name, cut in cuts.items():
    yaml.safe_dump(cut, open(f"/tmp/rig/h-{name}.yaml", "w"), sort_keys=False)
PY
until grep -q MODEL-DONE /tmp/rig/model.log; do sleep 5; done
echo "8B model ready $(date -u +%T)"
bash $H rig sweep flags /tmp/rig/h-8b.yaml --out /tmp/rig/h-8b; echo "H8B-DONE rc=$? $(date -u +%T)"
until grep -q MODEL-tinyllama-1.1b-DONE /tmp/rig/model.log; do sleep 5; done
small() { VLLM_MODEL=$M/tinyllama-1.1b VLLM_SERVED_MODEL_NAME=tinyllama-1.1b bash $H rig sweep flags /tmp/rig/h-1b.yaml "$@"; }
small --out /tmp/rig/h-1b; echo "H1B-DONE rc=$? $(date -u +%T)"
if [[ -x /tmp/rig/engines/aphrodite/python ]]; then
  bash $H rig sweep flags /tmp/rig/h-aph.yaml --out /tmp/rig/h-aph; echo "HAPH-DONE rc=$? $(date -u +%T)"
fi
small --out /tmp/rig/h-1b-r2; echo "H1BR2-DONE rc=$? $(date -u +%T)"
