"""`rig sweep slo`: the highest open-loop rate each engine serves within an SLO (docs/slo-search.md).

    rig sweep slo --engines vllm-cpu,llamacpp-cpu,transformers --slo ttft_ms=2000 --attainment 99

For each engine in turn: start it (local, on a free port), warm it up (never in runs.csv), then
probe offered rates as loadtest/sweep/slo_search.py plans (the lowest rate, doubling until one
fails, then bisection until the bracket is narrow enough; a rate whose attainment is too close
to call is run again), and stop it. Several targets (--slo ttft_p99_ms=2000,itl_p99_ms=100) are
judged apart, each rate run --trials times at least, with a 95% interval on each target and on
the answer; every miss is printed with its target and by how much. Each probe is the rig's own
Locust run, tagged NAME, so its row is in runs.csv like any run. Ends with one table, a line
per engine (the rate with its bracket, probes, runs), and writes OUT/sweeps/NAME/slo.csv (that table) and probes.csv (every
run it used). sweep.json records each run as it ends; a re-run with the same options reuses the
runs it recorded (same probe, rig version, and a row still in runs.csv), so an interrupted
search resumes where it stopped and a finished one only prints its table again.

Exit: 0 every engine's rate found (or above --max-rate), 1 a run failed or had failed requests,
2 bad options, an engine did not start, or an engine missed the SLO already at --min-rate
(one `error:` line each), 130 interrupted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from loadtest.toolkit.args import RigParser, command_prog
from loadtest.launch.processes import free_port
from loadtest.toolkit.types import (BadValue, cpu_list, duration, non_negative_number, percent,
                                    positive_int, positive_number, writable_folder)
from loadtest.client.arrivals import ARRIVALS
from loadtest.cpus import complete_layout
from loadtest.race.args import DEFAULT_ENGINES, local_engines
from loadtest.results.files import read_runs, write_csv
from loadtest.results.goodput import Slo, parse_slo
from loadtest.results.version import rig_version
from loadtest.sweep.cells import Cell
from loadtest.sweep.matrix import EngineConfig
from loadtest.launch import RunSpec, run, run_ids
from loadtest.launch.options import add_run_options
from loadtest.sweep.slo_search import Bracket, Judgement, Limit, Rule, Run, Width, judge, next_rate
from loadtest.sweep.state import SweepState

__all__ = ["main", "parse_args", "parser", "width"]

PROBE_COLUMNS = ["engine", "rate", "repeat", "slo_met_pct", "slo_percentiles", "slo_values",
                 "kept_up", "req_per_s", "ttft_sched_p99_ms", "failed", "run_missed",
                 "probe_verdict", "probe_sure", "probe_missed", "run_id"]
TABLE_COLUMNS = ["engine", "slo", "attainment_pct", "rate", "bracket_low", "bracket_high",
                 "ci_low", "ci_high", "status", "probes", "runs", "trials", "failed_because"]


def width(text: object) -> Width:
    """--width: req/s (0.25) or percent of the bracket's lower end (10%), above 0."""
    raw = str(text).strip()
    relative = raw.endswith("%")
    try:
        value = positive_number(raw[:-1] if relative else raw)
    except BadValue:
        raise BadValue(f"must be req/s or a percent above 0 (0.25, 10%), got {text!r}") from None
    return Width(value, relative)


def slo_targets(text: object) -> str:
    """--slo: checked as the locustfile checks it; required here (the search needs a target)."""
    try:
        if parse_slo(str(text)) is None:
            raise BadValue("names no target: e.g. ttft_ms=2000")
    except ValueError as exc:
        raise BadValue(str(exc)) from None
    return str(text).strip()


def parser() -> RigParser:
    p = RigParser(prog=command_prog("python -m loadtest.sweep.slo"),
                  description="What is the highest request rate each engine serves within an SLO?",
                  epilog="example:\n  rig sweep slo --engines vllm-cpu,llamacpp-cpu,transformers "
                         "--slo ttft_ms=2000 --attainment 99\n"
                         "exit: 0 found, 1 a run failed, 2 bad input, an engine did not start or "
                         "missed at --min-rate")
    p.add_argument("--engines", default=",".join(DEFAULT_ENGINES),
                   help=f"local engines, searched in this order (default {','.join(DEFAULT_ENGINES)})")
    p.add_argument("--slo", type=slo_targets, default="ttft_ms=1000",
                   help="latency targets, e.g. ttft_ms=2000 (per request) or ttft_p99_ms=2000 "
                        "(default ttft_ms=1000: with --attainment 99, TTFT p99 <= 1 s)")
    p.add_argument("--attainment", type=percent, default="99",
                   help="percent of requests that must meet --slo (default 99)")
    p.add_argument("--min-rate", type=positive_number, default="0.5",
                   help="the first and lowest rate probed, req/s (default 0.5)")
    p.add_argument("--max-rate", type=positive_number, default="64",
                   help="the highest rate probed, req/s (default 64)")
    p.add_argument("--width", type=width, default="10%",
                   help="stop when the bracket is this narrow: req/s (0.25) or percent of its "
                        "lower end (default 10%%)")
    p.add_argument("--margin", type=non_negative_number, default="2",
                   help="attainment this many points or less from --attainment is run again "
                        "(default 2)")
    p.add_argument("--trials", type=positive_int, default="1",
                   help="runs of each rate at least, before it is judged; 2 or more give each "
                        "target a 95%% interval and the answer one (default 1)")
    p.add_argument("--max-repeats", type=positive_int, default=None,
                   help="runs of one rate at most, when a verdict is too close to call "
                        "(default 3, or --trials when above)")
    add_run_options(p, "users", "requests", "max_tokens", "prompts", "ignore_eos",
                    helps={"users": "cap on requests in flight"})
    add_run_options(p, "arrival", "arrival_seed", helps={
        "arrival": f"{' | '.join(ARRIVALS)}", "arrival_seed": "the schedule's seed"})
    p.add_argument("--engine-cpus", type=cpu_list, default=None,
                   help="the engines' cores (default: all but the first)")
    add_run_options(p, "client_cpus",
                    helps={"client_cpus": "the client's cores (default: the first)"})
    p.add_argument("--name", default="slo", help="search name: runs' tag and folder (default slo)")
    p.add_argument("--out", type=writable_folder, default=Path("results"),
                   help="results folder (default results/)")
    p.add_argument("--run-timeout", type=duration, default="900",
                   help="how long one run may take: seconds, or 15m (default 900)")
    p.set_defaults(users=64, requests=64, max_tokens=32)
    return p


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The checked search; one `error:` line and exit 2 (SystemExit) on bad input."""
    p = parser()
    args = p.parse_args(list(argv))
    args.engines = local_engines(p, args.engines)
    if args.max_repeats is None:
        args.max_repeats = max(3, args.trials)
    elif args.max_repeats < args.trials:
        p.error(f"--max-repeats {args.max_repeats} is below --trials {args.trials}")
    if args.max_rate < args.min_rate:
        p.error(f"--max-rate {args.max_rate:g} is below --min-rate {args.min_rate:g}")
    if not args.name or not all(c.isalnum() or c in "._-" for c in args.name):
        p.error(f"--name is a folder name of letters, digits, '.', '_' and '-', got {args.name!r}")
    try:
        args.engine_cpus, args.client_cpus = complete_layout(args.engine_cpus or "",
                                                             args.client_cpus or "")
    except ValueError as exc:
        p.error(str(exc))
    return args


def rule_of(args: argparse.Namespace) -> Rule:
    slo: Slo | None = parse_slo(args.slo)
    limits = tuple(Limit(t.key, t.limit_ms) for t in (slo.targets if slo else ())
                   if t.percentile is not None)
    return Rule(args.attainment, args.width, args.min_rate, args.max_rate, args.margin,
                args.max_repeats, args.trials, limits)


def probe_cell(args: argparse.Namespace, engine: str, rate: float, repeat: int) -> Cell:
    """One run of one rate as a sweep cell (sweep.json's key): its id a hash of everything that
    shapes the run's row, not the search's own rule; its folder ENGINE-rateR/uUSERS-rREPEAT."""
    key = {"engine": engine, "rate": rate, "repeat": repeat, "slo": args.slo,
           "users": args.users, "requests": args.requests, "max_tokens": args.max_tokens,
           "prompts": args.prompts, "ignore_eos": args.ignore_eos, "arrival": args.arrival,
           "arrival_seed": args.arrival_seed, "engine_cpus": args.engine_cpus}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    config = EngineConfig(engine, "local", {})
    return Cell(config, f"{engine}-rate{rate:g}", args.users, repeat, digest)


class Search:
    """One engine's search: runs what next_rate asks, reusing runs sweep.json recorded; the
    engine is started only when a run is needed."""

    def __init__(self, args: argparse.Namespace, engine: str, state: SweepState,
                 stack: ExitStack) -> None:
        self.args, self.engine, self.state, self.stack = args, engine, state, stack
        self.url = ""
        self.rows: list[dict[str, object]] = []  # every run used, in order
        self.probes: dict[float, list[Run]] = {}
        self.worst = 0

    def run(self) -> Bracket:
        rule = rule_of(self.args)
        while not isinstance(step := next_rate(self.probes, rule), Bracket):
            row = self._row(step, len(self.probes.get(step, [])) + 1)
            if row is None:
                raise RunFailed(f"{self.engine}: the run at {step:g} req/s did not finish")
            run = _run(row)
            self.probes.setdefault(step, []).append(run)
            alone = judge([run], replace(rule, trials=1, max_repeats=1))
            probe = judge(self.probes[step], rule)
            self._say(step, len(self.probes[step]), alone, probe)
            self.rows.append({**row, "kept_up": run.kept_up, "run_missed": "; ".join(alone.missed),
                              "probe_verdict": _VERDICTS[probe.verdict],
                              "probe_sure": probe.sure if probe.verdict is not None else "",
                              "probe_missed": "; ".join(probe.missed)})
        return step

    def _say(self, rate: float, repeat: int, alone: Judgement, probe: Judgement) -> None:
        """The console's account of a run and, once decided, of its rate: what it missed."""
        print(f"  {self.engine} at {rate:g} req/s, run {repeat}: "
              + ("met every target" if not alone.missed else "missed " + "; ".join(alone.missed)),
              file=sys.stderr, flush=True)
        if probe.verdict is not None:
            sure = "sure" if probe.sure else "not sure"
            print(f"  {self.engine} at {rate:g} req/s: {_VERDICTS[probe.verdict]} ({sure}, "
                  f"{repeat} runs)" + (": " + "; ".join(probe.missed) if probe.missed else ""),
                  file=sys.stderr, flush=True)

    def _row(self, rate: float, repeat: int) -> dict[str, str] | None:
        cell = probe_cell(self.args, self.engine, rate, repeat)
        runs_csv = self.args.out / "runs.csv"
        version = rig_version()
        skip, _ = self.state.resume_check(cell, version, run_ids(runs_csv))
        if skip:
            run_id = self.state.cell(cell)["run_id"]
            return next(r for r in read_runs(runs_csv) if r.get("run_id") == run_id)
        self._start()
        print(f"+ {self.engine} at {rate:g} req/s, run {repeat}", file=sys.stderr, flush=True)
        folder = self.args.out / "sweeps" / self.args.name / self.engine
        outcome = run(self._probe(rate, repeat), folder / f"rate{rate:g}-r{repeat}.log",
                      self.args.run_timeout)
        row = outcome.row
        if outcome.exit_code not in (0, 1) or row is None:
            self.state.set_cell(cell, status="failed", reason=outcome.error)
            self.worst = max(self.worst, 1)
            return None
        self.worst = max(self.worst, outcome.exit_code)
        self.state.set_cell(cell, status="ok", reason="", run_id=row["run_id"],
                            rig_version=row.get("rig_version", ""), exit_code=outcome.exit_code,
                            engine=self.engine, rate=rate)
        return row

    def _start(self) -> None:
        if self.url:
            return
        from loadtest.local_engine import LocalEngine

        folder = self.args.out / "sweeps" / self.args.name / self.engine
        folder.mkdir(parents=True, exist_ok=True)
        engine = LocalEngine(port=free_port(), log_path=folder / "engine.log", engine=self.engine,
                             cpus=self.args.engine_cpus or None)
        self.stack.enter_context(engine)
        self.url = engine.url
        warm = self._spec(min(self.args.users, 8), requests=16, warmup=True)
        run(warm, folder / "warmup.log", self.args.run_timeout)

    def _probe(self, rate: float, repeat: int) -> RunSpec:
        a = self.args
        return self._spec(a.users, requests=a.requests, rate=rate, arrival=a.arrival,
                          arrival_seed=a.arrival_seed, repeat=repeat, tag=a.name, slo=a.slo,
                          keep_outputs=True)

    def _spec(self, users: int, **values: object) -> RunSpec:
        a = self.args
        return RunSpec.of(engine=self.engine, host=self.url, users=users, only_summary=True,
                          max_tokens=a.max_tokens, prompts=a.prompts, out=a.out,
                          ignore_eos=a.ignore_eos,
                          cpus=a.client_cpus or None, python=sys.executable, **values)


_VERDICTS = {True: "pass", False: "fail", None: "again"}


class RunFailed(RuntimeError):
    """A probe's run did not finish: this engine's search cannot go on."""


def _run(row: dict[str, str]) -> Run:
    from loadtest.report.goodput import saturated  # pandas, matplotlib: only once a run is in

    met = float(row.get("slo_met_pct") or 0)
    return Run(met, not str(row.get("slo_percentiles", "")).startswith("missed"),
               not saturated(row), slo_values(str(row.get("slo_values") or "")))


def slo_values(text: str) -> dict[str, float | None]:
    """The row's slo_values as figures: each percentile target's ms (None: no value);
    per-request shares (`%`) are left out, the attainment judging those together."""
    values: dict[str, float | None] = {}
    for part in filter(None, text.split(";")):
        key, _, value = part.partition("=")
        if value.endswith("%"):
            continue
        try:
            values[key] = None if value == "none" else float(value)
        except ValueError:
            values[key] = None
    return values


def table_line(args: argparse.Namespace, engine: str, bracket: Bracket | str,
               rows: Sequence[dict[str, object]]) -> dict[str, object]:
    """slo.csv's line for one engine; ``bracket`` a reason when the search could not finish."""
    whole = bracket if isinstance(bracket, Bracket) else Bracket(None, None)
    status = bracket.status if isinstance(bracket, Bracket) else bracket
    because = [r["probe_missed"] for r in rows if r.get("probe_verdict") == "fail"
               and whole.high is not None and _float(r.get("rate")) == whole.high]
    return {"engine": engine, "slo": args.slo, "attainment_pct": args.attainment,
            "rate": _blank(whole.low), "bracket_low": _blank(whole.low),
            "bracket_high": _blank(whole.high), "ci_low": _blank(whole.ci_low),
            "ci_high": _blank(whole.ci_high), "status": status,
            "probes": len({r.get("rate") for r in rows}), "runs": len(rows),
            "trials": args.trials, "failed_because": because[-1] if because else ""}


def _blank(value: float | None) -> float | str:
    return "" if value is None else value


def _float(value: object) -> float | None:
    try:
        return float(str(value))
    except ValueError:
        return None


def _interval_text(line: dict[str, object]) -> str:
    """The 95% interval on the answer, '?' on a side no rate settled surely."""
    if line["bracket_low"] == "" and line["bracket_high"] == "":
        return "-"
    low = f"{line['ci_low']:g}" if line["ci_low"] != "" else "?"
    high = f"{line['ci_high']:g}" if line["ci_high"] != "" else "?"
    return f"{low} .. {high}"


def markdown(lines: Sequence[dict[str, object]], args: argparse.Namespace) -> str:
    head = (f"The most req/s each engine serves with {args.attainment:g}% of requests meeting "
            f"{args.slo} (bracket: passed .. failed; width {args.width.text}; 95% interval: "
            f"surely passed .. surely failed, ? where no rate was sure, {args.trials} or more "
            f"runs per rate)\n\n"
            "| engine | req/s | bracket | 95% interval | probes | runs | status "
            "| failed because |\n"
            "|---|---:|---|---|---:|---:|---|---|\n")
    body = ""
    for line in lines:
        low = f"{line['bracket_low']:g}" if line["bracket_low"] != "" else "-"
        high = f"{line['bracket_high']:g}" if line["bracket_high"] != "" else "-"
        rate = f"{line['rate']:g}" if line["rate"] != "" else (
            f"< {high}" if line["bracket_high"] != "" else "-")
        body += (f"| {line['engine']} | {rate} | {low} .. {high} | {_interval_text(line)} | "
                 f"{line['probes']} | {line['runs']} | {line['status']} | "
                 f"{line['failed_because'] or '-'} |\n")
    return head + body


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    folder = args.out / "sweeps" / args.name
    folder.mkdir(parents=True, exist_ok=True)
    state = SweepState.open(folder / "sweep.json", {
        "name": args.name, "kind": "slo", "status": "running", "rig_version": rig_version(),
        "results": str(args.out), "search": {k: str(v) for k, v in vars(args).items()}})
    state.save()
    started = time.monotonic()
    lines: list[dict[str, object]] = []
    probes: list[dict[str, object]] = []
    code = 0
    try:
        for engine in args.engines:
            bracket, rows, worst = _search(args, engine, state)
            code = max(code, worst)
            lines.append(table_line(args, engine, bracket, rows))
            probes += rows
            write_csv(folder / "probes.csv", PROBE_COLUMNS, probes)
            write_csv(folder / "slo.csv", TABLE_COLUMNS, lines)
    except KeyboardInterrupt:
        state.data["status"] = "interrupted"
        state.save()
        print("interrupted: the engine was stopped; a re-run resumes the search", file=sys.stderr)
        return 130
    state.data["status"] = "done"
    state.save()
    print(markdown(lines, args))
    print(f"search {args.name}: {sum(int(str(line['runs'])) for line in lines)} runs in "
          f"{(time.monotonic() - started) / 60:.1f} min; {folder / 'slo.csv'}, "
          f"{folder / 'probes.csv'}", file=sys.stderr)
    for line in lines:
        if line["status"] == "misses at the lowest rate":
            print(f"error: {line['engine']} misses {args.slo} for {args.attainment:g}% of "
                  f"requests already at the lowest rate, {args.min_rate:g} req/s (--min-rate)",
                  file=sys.stderr)
            code = 2
        elif line["status"] not in ("found", "at least the highest rate"):
            code = 2 if line["status"].startswith("did not start") else max(code, 1)
    return code


def _search(args: argparse.Namespace, engine: str,
            state: SweepState) -> tuple[Bracket | str, list[dict[str, object]], int]:
    from loadtest.local_engine import EngineStartError

    with ExitStack() as stack:
        search = Search(args, engine, state, stack)
        try:
            return search.run(), search.rows, search.worst
        except EngineStartError as exc:
            print(f"error: {engine}: {str(exc).splitlines()[0]}", file=sys.stderr)
            return "did not start", search.rows, 2
        except RunFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return "a run failed", search.rows, 1


if __name__ == "__main__":
    sys.exit(main())
