"""Time-bounded runs: --duration, the measurement window (--warmup-s, --cooldown-s), timeslices
(--timeslice-s) and staged load (--stages, loadtest/client/stages.py).

    rig run --engine llamacpp-cpu --users 32 --duration 3m --warmup-s 30 --cooldown-s 10

With --duration S the users send for S seconds from the moment dispatch opens, cycling through
the workload's requests (--requests is then the size of that cycle), and the run ends when the
requests still in flight at S have finished: they are recorded, not cut. With --rate too, the
schedule (--arrival, --arrival-seed) runs until S instead of for --requests sends. The row keeps the whole
run's figures in its usual columns and the window's, [warm-up, S - cool-down), in window_*
columns (loadtest/results/window.py). --stages runs the stages of a file instead, for their
total duration. Without either, the run is the fixed workload (--requests) as before.
Every run's run.json holds its timeslices: the figures of every --timeslice-s seconds.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.toolkit.types import duration, existing_file, non_negative_number, positive_number
from loadtest.client.arrivals import OpenLoop, send_offsets_ns
from loadtest.client.options import ConfigError
from loadtest.client.stages import Stage, StageError, load_stages, stage_bounds, stage_offsets_ns
from loadtest.results.record import RequestRecord

__all__ = ["DEFAULT_TIMESLICE_S", "Timing", "add_timing_options", "print_window",
           "timing_from_options"]

DEFAULT_TIMESLICE_S = 5.0


@dataclass(frozen=True)
class Timing:
    duration_s: float | None = None  # None: the fixed workload
    warmup_s: float = 0.0
    cooldown_s: float = 0.0
    timeslice_s: float = DEFAULT_TIMESLICE_S
    stages: tuple[Stage, ...] = ()
    stages_file: str = ""

    @property
    def timed(self) -> bool:
        return self.duration_s is not None

    def schedule_ns(self, open_loop: OpenLoop | None = None) -> list[int] | None:
        """A time-bounded open-loop run's sends, as offsets from the origin: rate stages', or
        --rate's schedule (its arrival and seed) up to --duration; None otherwise."""
        if self.stages and self.stages[0].rate is not None:
            return stage_offsets_ns(list(self.stages))
        if open_loop is None or self.duration_s is None:
            return None
        end_ns = self.duration_s * 1e9
        count = int(open_loop.rate * self.duration_s * 1.5) + 16
        while True:  # the same draws as a fixed schedule's, cut at the duration
            offsets = send_offsets_ns(count, open_loop.rate, open_loop.arrival, open_loop.seed,
                                      open_loop.burstiness)
            if offsets[-1] >= end_ns:
                return [o for o in offsets if o < end_ns]
            count *= 2

    def columns(self, schedule_ns: list[int] | None = None) -> dict[str, Any]:
        """The run's timing settings, for run.json and runs.csv (a timed open-loop run's
        schedule_s: its own last send)."""
        columns: dict[str, Any] = {"timeslice_s": self.timeslice_s}
        if schedule_ns:
            columns["schedule_s"] = schedule_ns[-1] / 1e9
        if self.timed:
            columns.update(duration_s=self.duration_s, warmup_s=self.warmup_s,
                           cooldown_s=self.cooldown_s)
        if self.stages:
            columns.update(stages_file=self.stages_file, stages=len(self.stages))
        return columns

    def figures(self, records: Sequence[RequestRecord], origin_ns: int | None) -> dict[str, Any]:
        """{"columns": the row's window_* columns (time-bounded runs), "timeslices": run.json's
        per-interval figures, "stages": each stage's figures (staged runs)}."""
        from loadtest.results import window  # pandas: imported when a run ends, not at start

        served = [r for r in records if not r.context_refused]
        if not served:
            return {"columns": {}, "timeslices": []}
        origin = origin_ns if origin_ns is not None else min(r.sent_ns for r in served)
        requests = window.requests_frame(served, origin)
        chunks = window.chunks_frame(served, origin)
        end_s = requests[["done_s", "sent_s"]].max().max()  # NaN-free: a failure may have no end
        sections: dict[str, Any] = {
            "columns": {}, "timeslices": window.timeslices(requests, chunks, self.timeslice_s,
                                                           float(end_s))}
        if self.duration_s is not None:
            sections["columns"] = window.window_columns(
                requests, chunks, window.Window(self.warmup_s, self.duration_s - self.cooldown_s))
        if self.stages:
            sections["stages"] = [
                {"stage": stage.name, "users": stage.users, "spawn_rate": stage.spawn_rate,
                 "rate": stage.rate,
                 **window.interval_figures(requests, chunks, start, end)}
                for stage, (start, end) in zip(self.stages, stage_bounds(list(self.stages)))]
        return sections


def print_window(row: dict[str, Any], stages: Sequence[dict[str, Any]]) -> None:
    """The console's lines for the window and each stage (after the run's own summary)."""
    def fmt(value: Any, digits: int = 1) -> str:
        return "-" if value is None else f"{value:,.{digits}f}"

    if row.get("window_s") is not None:
        print(f"window {row['window_start_s']:g}-{row['window_end_s']:g} s: "
              f"{fmt(row['window_output_tok_per_s'])} tok/s, {fmt(row['window_req_per_s'], 2)} "
              f"req/s | ttft p50 {fmt(row['window_ttft_p50_ms'])} p99 "
              f"{fmt(row['window_ttft_p99_ms'])} ms | itl p50 {fmt(row['window_itl_p50_ms'])} p99 "
              f"{fmt(row['window_itl_p99_ms'])} ms | {row['window_sent']} sent, "
              f"{row['window_failed']} failed", file=sys.stderr)
    for stage in stages:
        load = f"{stage['rate']:g} req/s" if stage.get("rate") else f"{stage['users']} users"
        print(f"stage {stage['stage']!r} ({load}, {stage['start_s']:g}-"
              f"{stage['end_s']:g} s): {fmt(stage['output_tok_per_s'])} tok/s | ttft p50 "
              f"{fmt(stage['ttft_p50_ms'])} p99 {fmt(stage['ttft_p99_ms'])} ms | itl p99 "
              f"{fmt(stage['itl_p99_ms'])} ms | {stage['sent']} sent, {stage['failed']} failed",
              file=sys.stderr)


def add_timing_options(parser: Any) -> None:
    # Text here, checked by timing_from_options: Locust's parser would print its own two-line
    # error for a typed option (the rig's checks give one `error:` line, as for --rate).
    group = parser.add_argument_group("llm-load-rig: time-bounded runs and staged load")
    group.add_argument("--duration", type=str, default=None,
                       help="send for this long (90, 90s, 3m), cycling through the workload; "
                            "requests in flight at the end are finished and recorded (default: "
                            "the fixed workload, --requests)")
    group.add_argument("--warmup-s", type=str, default=0.0,
                       help="with --duration or --stages: seconds at the start left out of the "
                            "row's window_* figures (default 0)")
    group.add_argument("--cooldown-s", type=str, default=0.0,
                       help="with --duration or --stages: seconds at the end left out of the "
                            "window_* figures (default 0)")
    group.add_argument("--timeslice-s", type=str, default=DEFAULT_TIMESLICE_S,
                       help="seconds per timeslice: run.json's per-interval figures and the "
                            f"report's plot of them (default {DEFAULT_TIMESLICE_S:g})")
    group.add_argument("--stages", type=str, default=None,
                       help="a YAML file of stages (users, duration, spawn_rate), run one after "
                            "another through Locust's load shape; figures per stage "
                            "(docs/load-shapes.md)")


def timing_from_options(options: Any) -> Timing:
    """The options' Timing; ConfigError (one line) for a bad value or combination."""
    duration_s = _typed(options, "duration", duration, None)
    warmup_s = _typed(options, "warmup_s", non_negative_number, 0.0)
    cooldown_s = _typed(options, "cooldown_s", non_negative_number, 0.0)
    timeslice_s = _typed(options, "timeslice_s", positive_number, DEFAULT_TIMESLICE_S)
    stages_path = _typed(options, "stages", existing_file, None)
    stages: tuple[Stage, ...] = ()
    if stages_path is not None:
        if duration_s is not None:
            raise ConfigError("--stages sets the run's duration (the stages' sum): drop --duration")
        try:
            stages = tuple(load_stages(Path(stages_path)))
        except StageError as exc:
            raise ConfigError(str(exc)) from None
        duration_s = sum(s.duration_s for s in stages)
    if duration_s is None:
        if warmup_s or cooldown_s:
            raise ConfigError("--warmup-s and --cooldown-s trim a time-bounded run: give "
                              "--duration or --stages")
    elif duration_s <= warmup_s + cooldown_s:
        raise ConfigError(f"--duration {duration_s:g} s leaves no window after --warmup-s "
                          f"{warmup_s:g} and --cooldown-s {cooldown_s:g}")
    if duration_s is not None:
        _check_combination(options, "--stages" if stages else "--duration")
    return Timing(duration_s, warmup_s, cooldown_s, timeslice_s, stages,
                  str(stages_path) if stages_path is not None else "")


def _check_combination(options: Any, name: str) -> None:
    """What a time-bounded run cannot be combined with (yet)."""
    if name == "--stages" and str(getattr(options, "rate", "") or "").strip():
        raise ConfigError("--stages with --rate: give each stage its rate in the file instead")
    if getattr(options, "workload", "") in ("conversation", "trace", "agentic") or getattr(
            options, "dataset_mode", "") == "conversation":
        raise ConfigError(f"{name} runs single requests: a conversation or trace workload has "
                          "its own length")


def _typed(options: Any, name: str, kind: Any, default: Any) -> Any:
    """An option's value through its type (Locust hands the locustfile parsed values, a test
    may hand text)."""
    value = getattr(options, name, default)
    if value is None or value == default:
        return value
    try:
        return kind(value)
    except ValueError as exc:
        raise ConfigError(f"--{name.replace('_', '-')} {exc}") from None
