#!/usr/bin/env bash
# lease B's runs, from a frozen copy of the tree (HEAD's loadtest/), one after the other
set -u
cd /work/main
rm -rf /tmp/rig/tree && mkdir -p /tmp/rig/tree
tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C /tmp/rig/tree
rm -rf /tmp/rig/tree/loadtest && cp -r build/head/loadtest /tmp/rig/tree/loadtest
export RIG_LLAMA_SERVER=/work/main/build/llama.cpp/cuda-90/bin/llama-server RIG_TEXTGEN_SOURCE=/work/main/build/textgen
cd /tmp/rig/tree
H=evidence/2026-11-26/gpu-engines/host.sh
until grep -q LLAMACPP-DONE /tmp/rig/llamacpp.log; do sleep 5; done
echo "GGUF ready $(date -u +%T)"
bash $H rig race --engines llamacpp,textgen 128,256 --out /tmp/rig/race-b; echo "RACEB-DONE rc=$? $(date -u +%T)"
/tmp/rig/engines/rig/python - <<'PY'
import yaml
d = yaml.safe_load(open("sweeps/gpu-workloads.yaml"))
d["engines"] = [e for e in d["engines"] if e["engine"] == "llamacpp"]
d["workload"]["tokenizer"] = "/tmp/rig/models/llama3-8b"
yaml.safe_dump(d, open("/tmp/rig/heats.yaml", "w"), sort_keys=False)
PY
bash $H rig sweep flags /tmp/rig/heats.yaml --out /tmp/rig/heats; echo "HEATS-DONE rc=$? $(date -u +%T)"
