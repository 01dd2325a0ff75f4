#!/bin/bash
# usage: meta.sh PKG VERSION -> reports/PKG-VERSION.json (metadata only, PEP 658, nothing installed)
pip install --dry-run --no-deps --ignore-installed --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_39_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --target /tmp/sglang-pins-none --report reports/$1-$2.json -q "$1==$2" > reports/$1-$2.log 2>&1
echo "$1 $2 rc=$?"
