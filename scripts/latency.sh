#!/usr/bin/env bash
# scripts/latency.sh ENGINE... [OPTIONS]: `rig latency` (loadtest/race/latency.py), the comparison
# studies' latency preset of the race; it takes every argument (--help: its options), checks them
# before it installs anything, and runs from the repository's root (a relative --out is under it).
cd "$(dirname "$0")/.." || exit 2
python=.venv/bin/python; [[ -x $python ]] || python=${PYTHON:-python3}  # any python3 checks first
exec "$python" -m loadtest.race.latency "$@"
