"""Offline bundles: an engine's wheels for a GPU host that reaches no package index.

    scripts/gpu_bundle.sh describe > host.json                # on the GPU host
    scripts/gpu_bundle.sh build vllm --host host.json --out B # here: resolve, fetch, trim, pack
    scripts/gpu_bundle.sh install B --target /opt/rig/vllm    # on the host: assemble, install, check

The data flow, one module each: ``host`` (what the host has: its Python, glibc, GPUs and
packages), ``recipes`` (what each engine needs, what serving leaves out, and what its wheel
carries that the host's GPUs cannot use), ``resolve`` (the pinned set the host lacks), ``pack``
(fetch, trim, parts of a chosen size, ``bundle.json``) and ``install`` (the host's side, standard
library and pip alone).
"""
