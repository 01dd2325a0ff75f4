"""What a run does beyond its workload, read from its options: open loop (--rate), latency
targets (--slo), kept outputs (--keep-outputs), the request deadline. Standard library only, so
every command checks them before it starts anything (loadtest/launch/checks.py)."""

from __future__ import annotations

from dataclasses import dataclass

from loadtest.client.arrivals import OpenLoop, open_loop_from_options
from loadtest.client.bounds import parse_request_deadline
from loadtest.client.options import ConfigError
from loadtest.results.goodput import Slo, parse_slo

__all__ = ["RunOptions", "run_options"]


@dataclass(frozen=True)
class RunOptions:
    """What a run does beyond its workload: open loop (--rate), latency targets (--slo), kept
    outputs (--keep-outputs)."""
    open_loop: OpenLoop | None = None
    slo: Slo | None = None
    keep_outputs: bool = False
    request_deadline_s: float | None = None  # --request-deadline; None: sized from the run


def run_options(options: object) -> RunOptions:
    """The options' RunOptions; ConfigError (one line) for a bad value, before anything is sent."""
    try:
        open_loop = open_loop_from_options(options)
        slo = parse_slo(str(getattr(options, "slo", "") or ""))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return RunOptions(open_loop, slo, bool(getattr(options, "keep_outputs", False)),
                      parse_request_deadline(options))
