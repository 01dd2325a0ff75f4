"""One measured run (or warm-up) of a sweep cell, described as a RunSpec.

The run appends its row to OUT/runs.csv itself; loadtest/launch runs it with the sweep's time
limit, keeps its output in the cell's locust.log and finds the row it added.
"""

from __future__ import annotations

import sys
from pathlib import Path

from loadtest.launch import RunSpec
from loadtest.sweep.matrix import SweepWorkload

__all__ = ["cell_spec"]


def cell_spec(*, engine: str, url: str, users: int, workload: SweepWorkload, out: Path,
              repeat: int, tag: str, flags: str | None, gpu: str, warmup_requests: int = 0,
              engine_urls: tuple[str, ...] = (), processes: int = 1) -> RunSpec:
    """The run of one cell (or, with `warmup_requests`, the warm-up run); `engine_urls`: the
    replicas behind the balancer at `url`, whose metrics and caches the run reads and empties;
    `processes`: the client's Locust processes (more than one: forked workers)."""
    source = {("workload" if k == "source" else k): v for k, v in workload.source}
    spec = RunSpec.of(engine=engine, host=url, users=users, only_summary=True,
                      requests=warmup_requests or workload.requests_at(users),
                      max_tokens=workload.max_tokens, prompts=workload.prompts,
                      temperature=workload.temperature, out=out, repeat=repeat, tag=tag,
                      flags=flags, gpu=gpu, ignore_eos=workload.ignore_eos,
                      api=workload.api or None, python=sys.executable,
                      engine_urls=",".join(engine_urls) or None,
                      processes=processes if processes > 1 else None, **source)
    if warmup_requests:
        return spec.with_(warmup=True)
    # sweeps keep the answers, so configurations can be compared for equal output
    # (loadtest/results/equivalence.py, the report's section)
    return spec.with_(slo=workload.slo or None, keep_outputs=True)
