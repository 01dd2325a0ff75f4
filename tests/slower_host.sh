#!/usr/bin/env bash
# usage: tests/slower_host.sh PERCENT COMMAND [ARGS...]
#   Runs COMMAND (and everything it starts: pytest, the engines, the client) as on a host
#   PERCENT% as fast as this one: a CPU quota of PERCENT% of all its cores, through a cgroup
#   (v1's cpu controller, or v2's cpu.max). Needs root. Docker's containers are not held: dockerd
#   puts them in cgroups of its own. E.g. the engine tier at half speed, to find the tests whose
#   verdict depends on how fast the host is (issue 38):
#     tests/slower_host.sh 50 .venv/bin/python -m pytest -rs -m "engine or docker"
#     tests/slower_host.sh 50 scripts/test.sh    # the whole suite (installs included)
set -euo pipefail
usage() { sed -n '2,9s/^# \{0,1\}//p' "$0" >&2; exit 2; }
[[ $# -ge 2 && $1 =~ ^[0-9]+$ ]] && (( $1 >= 1 && $1 <= 100 )) || usage
percent=$1; shift
# A short period (10 ms): the group's processes are held back in slices of at most 10 ms, as
# on a slower core, not frozen for tens of ms at a time as with the default 100 ms (a stall a
# slower host does not have: it failed the open-loop schedule test's 50 ms send-lag limit).
period=10000  # µs
quota=$(( period * $(nproc) * percent / 100 ))
name="llm-load-rig-slower-$$"
if [[ -d /sys/fs/cgroup/cpu && -w /sys/fs/cgroup/cpu ]]; then  # v1
  group=/sys/fs/cgroup/cpu/$name
  mkdir "$group"
  echo "$period" > "$group/cpu.cfs_period_us"
  echo "$quota" > "$group/cpu.cfs_quota_us"
elif [[ -f /sys/fs/cgroup/cgroup.controllers && -w /sys/fs/cgroup ]]; then  # v2
  group=/sys/fs/cgroup/$name
  grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu > /sys/fs/cgroup/cgroup.subtree_control
  mkdir "$group"
  echo "$quota $period" > "$group/cpu.max"
else
  echo "error: no writable cgroup cpu controller here (run as root)" >&2; exit 2
fi
# the group goes once everything in it has ended (rmdir fails while a process is left in it)
trap 'echo $$ > "$(dirname "$group")/cgroup.procs"; rmdir "$group" 2>/dev/null || echo "warning: $group still holds processes" >&2' EXIT
echo $$ > "$group/cgroup.procs"
echo "+ $* (CPU quota: $percent% of $(nproc) cores, $group)" >&2
rc=0; "$@" || rc=$?
exit "$rc"
