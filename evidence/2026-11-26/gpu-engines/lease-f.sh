#!/usr/bin/env bash
# lease F's runs, from a frozen copy of the tree: the flag matrix's scheduler cells (max-model-len
# for both engines; max-num-seqs and max-num-batched-tokens for Aphrodite) beside each engine's
# defaults, 2 repeats in each start; then the workload heats for Aphrodite and vLLM, in the other
# order from the third lease's. Started in the background after `host.sh model` (one device call).
set -u
cd "$(dirname "$0")/../../.."
rm -rf /tmp/rig/tree && mkdir -p /tmp/rig/tree
tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C /tmp/rig/tree
cd /tmp/rig/tree
H=evidence/2026-11-26/gpu-engines/host.sh
/tmp/rig/engines/rig/python - <<'PY'
import yaml
flags = yaml.safe_load(open("sweeps/gpu-vllm-aphrodite-flags.yaml"))
wanted = {("vllm", "MAX_TOTAL_TOKENS"), ("aphrodite", "MAX_TOTAL_TOKENS"),
          ("aphrodite", "MAX_CONCURRENT_REQUESTS"), ("aphrodite", "MAX_BATCH_PREFILL_TOKENS")}
cells = [e for e in flags["engines"] if any((e["engine"], key) in wanted for key in e.get("sweep", {}))]
defaults = [{"engine": name, "launch": "local", "gpus": ["0"]} for name in ("vllm", "aphrodite")]
flags["engines"] = [defaults[0], *[e for e in cells if e["engine"] == "vllm"],
                    defaults[1], *[e for e in cells if e["engine"] == "aphrodite"]]
flags["repeats"] = 2
yaml.safe_dump(flags, open("/tmp/rig/flags-f.yaml", "w"), sort_keys=False)
heats = yaml.safe_load(open("sweeps/gpu-workloads.yaml"))
heats["workload"]["tokenizer"] = "/tmp/rig/models/llama3-8b"  # host.sh serves it as llama3-8b
heats["engines"] = [e for name in ("aphrodite", "vllm") for e in heats["engines"] if e["engine"] == name]
yaml.safe_dump(heats, open("/tmp/rig/heats-f.yaml", "w"), sort_keys=False)
PY
until grep -q MODEL-DONE /tmp/rig/model.log; do sleep 5; done
echo "model ready $(date -u +%T)"
bash $H rig sweep flags /tmp/rig/flags-f.yaml --out /tmp/rig/flags-f; echo "FLAGS-DONE rc=$? $(date -u +%T)"
bash $H rig sweep flags /tmp/rig/heats-f.yaml --out /tmp/rig/heats-f; echo "HEATS-DONE rc=$? $(date -u +%T)"
