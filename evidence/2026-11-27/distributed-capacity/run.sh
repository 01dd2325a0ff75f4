#!/usr/bin/env bash
# On the GPU host before its engines start (/tmp/rig/tree, the rig bundle installed, Debian's
# iproute2 carried to /tmp/rig/iproute for a host without `ip`): the faithful load from 1, 2, 4
# and 8 worker hosts (network namespaces), each on one core of its own, the master on another,
# the pacer on cores 0-7 (8 processes); cores 28-31 are left to what runs beside it (the model
# being written, the bundles unpacked).
set -u
cd /tmp/rig/tree
export PATH=$PATH:/tmp/rig/iproute
py=/tmp/rig/engines/rig/python
taskset -c 0-27 $py -m loadtest.calibration.calibrate --worker-hosts 1,2,4,8 --users 8,16,32,64,128 \
  --requests 4 --pacer-cores 0-7 --client-cores 8-27 --python $py --out /tmp/rig/cal
echo "CAL-DONE rc=$? $(date -u +%T)"
touch /tmp/rig/cal.done
