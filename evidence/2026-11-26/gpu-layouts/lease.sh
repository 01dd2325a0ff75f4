#!/usr/bin/env bash
# The two-GPU lease's runs, from a frozen copy of the tree (after ../gpu-engines/host.sh's keep,
# install rig vllm and model steps, and nginx carried to /tmp/rig/nginx): vLLM as one server per
# GPU behind the rig's nginx against one server over both GPUs (--tensor-parallel-size 2), the
# fixed workload at 64 and 256 users, two interleaved repeats; then, as time allows, the replicas
# with two API-server processes each, one repeat.
set -u
cd "$(dirname "$0")/../../.."
rm -rf /tmp/rig/tree && mkdir -p /tmp/rig/tree
tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C /tmp/rig/tree
cd /tmp/rig/tree
export RIG_NGINX=/tmp/rig/nginx/nginx
H=evidence/2026-11-26/gpu-engines/host.sh
/tmp/rig/engines/rig/python - <<'PY'
import yaml
matrix = yaml.safe_load(open("sweeps/gpu-vllm-layouts-2gpu.yaml"))
del matrix["workloads"]                     # the fixed workload only: 2,048-token prompts take 30 s a cell
matrix["workload"].update(requests=1024, requests_per_user=8)   # runs of 5 s or more on two GPUs
matrix["users"] = [64, 256]
matrix["repeats"] = 2
vllm = [e for e in matrix["engines"] if e["engine"] == "vllm"]
main, extra = dict(matrix, engines=vllm[:2]), dict(matrix, engines=vllm[2:], repeats=1)
yaml.safe_dump(main, open("/tmp/rig/layouts.yaml", "w"), sort_keys=False)
yaml.safe_dump(extra, open("/tmp/rig/layouts-api2.yaml", "w"), sort_keys=False)
PY
until grep -q MODEL-DONE /tmp/rig/model.log; do sleep 5; done
echo "model ready $(date -u +%T)"
bash $H rig sweep flags /tmp/rig/layouts.yaml --out /tmp/rig/layouts; echo "LAYOUTS-DONE rc=$? $(date -u +%T)"
bash $H rig sweep flags /tmp/rig/layouts-api2.yaml --out /tmp/rig/layouts-api2; echo "API2-DONE rc=$? $(date -u +%T)"
