#!/usr/bin/env bash
# A one-GPU lease's run, from a frozen copy of the tree in /tmp/rig/tree (after
# ../../2026-11-26/gpu-engines/host.sh's keep and `install rig vllm` steps, the 1.1B model in
# /tmp/rig/models/tinyllama-1.1b): what each process of one vLLM uses of a core at 256 users
# (run.json's engine_processes), to see its one API server at the limit lease K inferred.
# `--enforce-eager` (no compilation, no CUDA graphs) only so that the server starts within the
# lease's last minutes: its tok/s is not comparable with lease K's.
set -u
cd /tmp/rig/tree
H=evidence/2026-11-26/gpu-engines/host.sh
cat > /tmp/rig/h-l.yaml <<'YAML'
name: vllm-processes-1gpu
workload: {prompts: mixed, requests: 2048, max_tokens: 128, ignore_eos: true}
users: [256]
repeats: 1
client_processes: 2
warmup_requests: 64
health_timeout_s: 400
engines:
  - engine: vllm
    launch: local
    gpus: ["0"]
    settings: {EXTRA_ARGS: "--enforce-eager"}
YAML
until [[ -f /tmp/rig/models/tinyllama-1.1b/config.json ]]; do sleep 2; done
VLLM_MODEL=/tmp/rig/models/tinyllama-1.1b VLLM_SERVED_MODEL_NAME=tinyllama-1.1b bash $H rig sweep flags \
  /tmp/rig/h-l.yaml --out /tmp/rig/h-l; echo "HL-DONE rc=$? $(date -u +%T)"
