"""Moved: workloads live in loadtest/workload/ (build_workload, the sources, the spec)."""
from loadtest.workload import *  # noqa: F401,F403
