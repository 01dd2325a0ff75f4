"""Goodput: the share of a run's requests that met every latency target, and their rate.

    --slo ttft_ms=500,itl_ms=50            every request: TTFT <= 500 ms and mean ITL <= 50 ms
    --slo e2e_ms=4000,ttft_p99_ms=800      per request e2e, and the run's p99 TTFT

A target is METRIC_ms=LIMIT (per request) or METRIC_pNN_ms=LIMIT (the run's NNth percentile),
for METRIC in ttft, itl, e2e, tpot. Per request:
- ttft, e2e: from the request's *scheduled* send time in open loop (--rate), so time spent
  waiting for a free user counts against it; from its actual send in closed loop;
- itl: the mean of the request's own chunk gaps (a request of one chunk has none and meets it);
- tpot: (e2e - ttft) / (output tokens - 1), from the actual send.
A failed request meets no target. Percentile targets are judged on the run's raw values (the
same set as its row: ttft and e2e from the schedule in open loop, itl pooled over every gap).

Columns (runs.csv):
- slo: the targets, in canonical order;
- slo_met_requests, slo_met_pct: requests that met every per-request target (of all sent);
- goodput_req_per_s, goodput_tok_per_s: those requests, and their output tokens, per second of
  the run's completion time; both 0 when the run missed a percentile target;
- slo_percentiles: "met", or "missed:" and the percentile targets it missed ("" without any);
- slo_values: each target's own figure, so a miss can say by how much: a percentile target's
  value in the run (`ttft_p99_ms=2310.5`, `none` when the run has no such values), a
  per-request target's share of the requests meeting it alone (`itl_ms=97.5%`), joined with ;.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loadtest.results.record import RequestRecord
from loadtest.toolkit.types import BadValue

__all__ = ["DEFAULT_SLO_SHARE_PCT", "METRICS", "Slo", "Target", "add_slo_option", "goodput",
           "parse_slo", "slo_text"]

METRICS = ("ttft", "itl", "e2e", "tpot")
# the percent of a run's requests that must meet the targets for its rate to count as within them
DEFAULT_SLO_SHARE_PCT = 99.0
_KEY = re.compile(r"^(ttft|itl|e2e|tpot)(?:_p(\d{1,2}(?:\.\d+)?))?_ms$")


@dataclass(frozen=True)
class Target:
    metric: str
    limit_ms: float
    percentile: float | None = None  # None: every request

    @property
    def key(self) -> str:
        pct = "" if self.percentile is None else f"_p{self.percentile:g}"
        return f"{self.metric}{pct}_ms"


@dataclass(frozen=True)
class Slo:
    targets: tuple[Target, ...]

    @property
    def text(self) -> str:
        return ",".join(f"{t.key}={t.limit_ms:g}" for t in self.targets)


def add_slo_option(parser: Any) -> None:
    parser.add_argument_group("llm-load-rig: goodput").add_argument(
        "--slo", default="",
        help="latency targets, e.g. ttft_ms=500,itl_ms=50 (per request) or ttft_p99_ms=800 (the "
             "run's percentile), of ttft, itl, e2e, tpot: the row gets the share of requests "
             "meeting them and goodput (their req/s and tok/s)")


def slo_text(text: object) -> str:
    """--slo as a command's parser takes it: checked as parse_slo checks it (BadValue, one line),
    kept as the text given (the runs it starts parse it again, in their own process)."""
    try:
        parse_slo(str(text))
    except ValueError as exc:
        raise BadValue(str(exc)) from None
    return str(text)


def parse_slo(text: str) -> Slo | None:
    """`ttft_ms=500,itl_p99_ms=50` -> Slo; None for ""; ValueError (one line) otherwise."""
    text = text.strip()
    if not text:
        return None
    targets: dict[str, Target] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        match = _KEY.match(key.strip())
        if not sep or not match:
            raise ValueError(f"--slo takes METRIC_ms=LIMIT or METRIC_pNN_ms=LIMIT for METRIC in "
                             f"{', '.join(METRICS)} (e.g. ttft_ms=500,itl_p99_ms=50), got {part!r}")
        try:
            limit = float(value)
        except ValueError:
            raise ValueError(f"--slo {key}: the limit must be a number of ms, got {value!r}") from None
        if not limit > 0 or limit == float("inf"):
            raise ValueError(f"--slo {key}: the limit must be above 0 ms, got {value!r}")
        percentile = float(match.group(2)) if match.group(2) else None
        if percentile is not None and not 0 < percentile < 100:
            raise ValueError(f"--slo {key}: the percentile must be between 0 and 100")
        target = Target(match.group(1), limit, percentile)
        if target.key in targets:
            raise ValueError(f"--slo names {target.key} twice")
        targets[target.key] = target
    order = {m: i for i, m in enumerate(METRICS)}
    return Slo(tuple(sorted(targets.values(),
                            key=lambda t: (order[t.metric], t.percentile or 0))))


def request_value(record: RequestRecord, metric: str) -> float | None:
    """The request's value of `metric` as targets judge it (ms); None when it has none."""
    if metric == "ttft":
        return record.ttft_sched_ms if record.scheduled_ns is not None else record.ttft_ms
    if metric == "e2e":
        return record.e2e_sched_ms if record.scheduled_ns is not None else record.e2e_ms
    if metric == "itl":
        gaps = record.chunk_gaps_ns
        return sum(gaps) / len(gaps) / 1e6 if gaps else None
    if record.ttft_ms is None or record.e2e_ms is None or (record.output_tokens or 0) < 2:
        return None
    return (record.e2e_ms - record.ttft_ms) / (record.output_tokens - 1)


def _meets(record: RequestRecord, targets: Sequence[Target]) -> bool:
    if not record.ok:
        return False
    for target in targets:
        value = request_value(record, target.metric)
        if value is not None and value > target.limit_ms:
            return False
        if value is None and target.metric in ("ttft", "e2e"):
            return False
    return True


def _run_values(records: Sequence[RequestRecord], metric: str) -> list[float]:
    done = [r for r in records if r.ok]
    if metric == "itl":
        return [g / 1e6 for r in done for g in r.chunk_gaps_ns]
    return [v for r in done if (v := request_value(r, metric)) is not None]


def goodput(records: Sequence[RequestRecord], completion_time_s: float | None,
            slo: Slo | None) -> dict[str, Any]:
    """The run's goodput columns (slo, slo_*, goodput_*: loadtest/results/schema.py); {}
    without --slo."""
    if slo is None:
        return {}
    per_request = [t for t in slo.targets if t.percentile is None]
    missed, figures = [], []
    for target in slo.targets:
        if target.percentile is None:
            alone = sum(_meets(r, [target]) for r in records)
            figures.append(f"{target.key}={100 * alone / len(records):.6g}%" if records
                           else f"{target.key}=none")
            continue
        values = _run_values(records, target.metric)
        value = _percentile(values, target.percentile)
        figures.append(f"{target.key}=" + ("none" if value is None else f"{value:.6g}"))
        if value is None or value > target.limit_ms:
            missed.append(target.key)
    met = [r for r in records if _meets(r, per_request)]
    seconds = completion_time_s or 0
    scale = 0.0 if missed or not seconds else 1 / seconds
    return {
        "slo": slo.text,
        "slo_met_requests": len(met),
        "slo_met_pct": 100 * len(met) / len(records) if records else None,
        "goodput_req_per_s": len(met) * scale if seconds else None,
        "goodput_tok_per_s": sum(r.output_tokens or 0 for r in met) * scale if seconds else None,
        "slo_percentiles": ("" if len(per_request) == len(slo.targets)
                            else "missed:" + ";".join(missed) if missed else "met"),
        "slo_values": ";".join(figures),
    }


def _percentile(values: list[float], q: float) -> float | None:
    import numpy as np  # here, not above: the run's options register without numpy
    return float(np.percentile(values, q)) if values else None
