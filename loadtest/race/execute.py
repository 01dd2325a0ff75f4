"""The race, carried out: each leg of the plan starts its engine, warms it up, runs the locustfile
at each user count the plan gives, and stops it; then the race table (loadtest/report).

What to run and when is loadtest/race/plan.py's; this module only does it, and says what
happened: an engine that does not start or cannot run is recorded and the race goes on, a run
with failed requests is counted in its row and ends the race with exit 1. With --until-known, heats whose leader is not known are run again by their
contenders (loadtest/known.py decides who), one leg per engine per pass, until known or
capped; each heat's line then says how many runs it took. With --answers, each engine then
answers a few prompts on a real model (loadtest/race/answers.py says how it serves it), one run
per engine tagged `answers`, shown after the race table; an engine that fails there is said so
and changes nothing of the race.
"""

from __future__ import annotations

import csv
import shlex
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from loadtest.launch import Launched, RunSpec, command, run
from loadtest.local_engine import EngineStartError, LocalEngine
from loadtest.race import answers
from loadtest.race.args import RaceArgs
from loadtest.race.earlier import TAG, EarlierRunsError, race_rows
from loadtest.known import more_runs, repeat_plan, standing
from loadtest.race.plan import MAX_TOKENS, PROMPTS, Leg, Race, first_counts
from loadtest.report.answer_table import ANSWERS_TAG

__all__ = ["run_race"]

WORKLOAD = {"prompts": PROMPTS, "max_tokens": MAX_TOKENS, "ignore_eos": True}
WARMUP = {"users": 8, "requests": 16}  # first requests pay one-off costs; never in runs.csv


def run_race(args: RaceArgs, earlier: dict[int, int]) -> int:
    """Race args.engines; the exit status (0 all ran every request, 1 not)."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _race(args, earlier)
    except EarlierRunsError as exc:  # runs.csv torn or edited during the race
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("** race interrupted (the engine it had started was stopped)", file=sys.stderr)
        return 130


def _race(args: RaceArgs, earlier: dict[int, int]) -> int:
    started = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"layout: engine on cores {args.engine_cpus or 'any'}, client on cores "
          f"{args.client_cpus or 'any'}", file=sys.stderr)
    race = Race(args.engines, args.users, first_counts(args.users, args.requests, earlier))
    first_row = len(race_rows(args.out))
    status = 0
    for leg in race.legs():
        if leg.catch_up:
            print(f"** {leg.engine} ran {_users(leg.users)} with fewer requests than a later "
                  "engine needed: it runs them again with the heats' counts", file=sys.stderr)
        status = max(status, _run_leg(race, leg, args, first_row))
    if args.until_known:
        status = max(status, _until_known(race, args, first_row, started))
    if args.answers:
        _answers_leg(race, args)
    report = _report(args.out, race, race_rows(args.out)[first_row:])
    return report or status


def _until_known(race: Race, args: RaceArgs, first_row: int, started: float) -> int:
    """Passes of repeat legs until every heat is known, no contender is under --max-repeats,
    --max-time has passed, or a pass adds no ranked run; then each heat's line."""
    status, seen = 0, -1
    while True:
        heats = heat_samples(race, race_rows(args.out)[first_row:])
        ranked = sum(len(runs) for heat in heats.values() for runs in heat.values())
        in_race = [engine for engine in race.engines if engine not in race.out]
        plan = repeat_plan(heats, in_race, args.max_repeats)
        if not plan or ranked == seen:
            break
        seen = ranked
        for engine, users in plan:
            if args.max_time_s is not None and time.monotonic() - started > args.max_time_s:
                print(f"** --max-time {args.max_time_s:g} s reached: no more repeats",
                      file=sys.stderr)
                plan = []
                break
            print(f"** {engine} runs {_users(users)} again: not known yet", file=sys.stderr)
            status = max(status, _run_leg(race, Leg(engine, users, repeat=True), args, first_row))
        if not plan:
            break
    for line in known_lines(heat_samples(race, race_rows(args.out)[first_row:]), args):
        print(line)
    return status


def heat_samples(race: Race, rows: Sequence[dict[str, str]]) -> dict[int, dict[str, list[float]]]:
    """{users: {engine: output tok/s of each ranked run}} of this race's heats: runs tagged demo
    at the heat's final count, every request answered, not invalid (as the race table ranks)."""
    heats: dict[int, dict[str, list[float]]] = {users: {} for users in race.users}
    for row in rows:
        users = int(row["users"]) if row.get("users", "").isdigit() else 0
        if (row.get("tag") != TAG or users not in heats or row.get("engine") not in race.engines
                or row.get("requests") != str(race.counts[users])
                or (row.get("failed") or "0") != "0"
                or row.get("verdict", "").strip().lower() == "invalid"):
            continue
        heats[users].setdefault(row["engine"], []).append(float(row["output_tok_per_s"]))
    return heats


def known_lines(heats: dict[int, dict[str, list[float]]], args: RaceArgs) -> list[str]:
    """One line per heat: the leader, whether known, the runs it took or how many more would
    resolve --resolve-pct (default: the difference observed)."""
    lines = []
    for users, samples in sorted(heats.items()):
        if not samples:
            continue
        heat = standing(samples)
        runs = "/".join(f"{heat.runs[e]}" for e in heat.runs)
        head = f"until known, {_users([users])}: {heat.leader} leads"
        if heat.runner_up is None:  # one contender ranked: no winner to know
            lines.append(f"until known, {_users([users])}: undecided — only {heat.leader} "
                         f"ranked ({runs} runs)")
            continue
        ahead = (f"{head} {heat.runner_up} by {heat.ahead_pct:.1f}% "
                 f"({heat.leader_mean:.0f} vs {heat.runner_up_mean:.0f} tok/s; runs {runs} of "
                 f"{', '.join(heat.runs)})")
        if heat.known:
            lines.append(f"{ahead}: known after {sum(heat.runs.values())} runs "
                         f"(the 95% t-interval on its lead excludes 0)")
            continue
        target = args.resolve_pct or heat.ahead_pct
        need = more_runs(heat, target)
        more = (f"about {need} more runs each would resolve a {target:.1f}% difference "
                f"(spread {heat.spread:.0f} tok/s)" if need else "no spread to judge by yet")
        lines.append(f"{ahead}: NOT known (capped); {more}")
    return lines


def _run_leg(race: Race, leg: Leg, args: RaceArgs, first_row: int = 0) -> int:
    """Start leg.engine, warm it up, run the plan's runs, stop it; 1 when it did not run or
    requests failed, else 0."""
    print(f"== {leg.engine}", file=sys.stderr)
    engine = LocalEngine(args.port, log_path=args.out / f"engine-{leg.engine}.log",
                         engine=leg.engine, cpus=args.engine_cpus or None)
    try:
        engine.start()
    except EngineStartError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return _did_not_run(race, leg.engine, f"did not start: {str(exc).splitlines()[0]}")
    assert engine.process is not None
    print(f"{leg.engine} healthy at {engine.url} (pid {engine.process.pid}, log "
          f"{engine.log_path})", file=sys.stderr)
    try:
        return _runs(race, leg, args, first_row)
    finally:
        engine.stop()


def _runs(race: Race, leg: Leg, args: RaceArgs, first_row: int = 0) -> int:
    warmup_log = args.out / f"warmup-{leg.engine}.log"
    if _locust(args, leg.engine, warmup_log=warmup_log, warmup=True, **WARMUP).exit_code == 2:
        why = next((line for line in _lines(warmup_log) if line.startswith("error:")),
                   f"see {warmup_log}")
        return _did_not_run(race, leg.engine, f"the warm-up could not run ({why})")
    status = 0
    for users in leg.users if leg.repeat else race.runs(leg):
        requests = race.counts[users]
        repeat = None
        if leg.repeat:  # labelled after the engine's runs of this heat in this race
            done = heat_samples(race, race_rows(args.out)[first_row:])[users].get(leg.engine, [])
            repeat = len(done) + 1
        launched = _locust(args, leg.engine, users=users, requests=requests, repeat=repeat)
        code = launched.exit_code
        if code == 1:
            print(f"** {leg.engine}: some requests failed at {_users([users])} (counted in its "
                  "row)", file=sys.stderr)
            status = 1
        elif code != 0:
            return _did_not_run(race, leg.engine,
                                f"its run at {_users([users])} could not run (exit {code})")
        if leg.repeat:  # never raises a count: the heat's runs must stay alike
            continue
        raised = race.record(leg.engine, users, [launched.row] if launched.row else [])
        if raised:
            given = (f" (REQUESTS {args.requests} was given, but a run under 5 s cannot be "
                     "ranked)" if args.requests is not None else "")
            print(f"** {leg.engine}'s run at {_users([users])} lasted under 5 s: that heat now "
                  f"has {raised} requests, not {requests}{given}; {leg.engine} runs it again",
                  file=sys.stderr)
    return status


def _answers_leg(race: Race, args: RaceArgs) -> None:
    """Each engine of the race in turn on SmolLM2: started, asked args.answers graded prompts
    (one run, tagged answers), stopped. One that cannot is said so; the race's result stands."""
    print(f"== answers: each engine on SmolLM2-135M-Instruct, the first {args.answers} graded "
          "prompts", file=sys.stderr)
    started = time.monotonic()
    cannot: dict[str, list[str]] = {}  # why -> the engines skipped for it
    for engine in args.engines:
        how = answers.serving(engine)
        if engine in race.out or isinstance(how, str):
            cannot.setdefault("it did not run in the race" if engine in race.out else how,
                              []).append(engine)
            continue
        why = _answer(engine, how, args)
        if why:
            print(f"** answers: {engine} did not answer: {why} (its log: "
                  f"{_answers_log(args, engine)}); the race's result stands", file=sys.stderr)
    for why, engines in cannot.items():
        print(f"** answers: {', '.join(engines)} skipped: {why}", file=sys.stderr)
    print(f"answers: {time.monotonic() - started:.0f} s", file=sys.stderr)


def _answer(engine: str, how: answers.Serving, args: RaceArgs) -> str | None:
    """One engine's answers run; why it did not answer, or None."""
    with answers.model_env(how.env):
        local = LocalEngine(args.port, list(how.extra_args), _answers_log(args, engine), engine,
                            cpus=args.engine_cpus or None)
        try:
            local.start()
        except EngineStartError as exc:
            return f"did not start ({str(exc).splitlines()[0]})"
        try:
            code = _locust(args, engine, users=1, requests=args.answers, tag=ANSWERS_TAG,
                           workload=answers.WORKLOAD, run_options=()).exit_code
        except EarlierRunsError as exc:  # its row unread: the heats' rows and report stand
            return str(exc)
        finally:
            local.stop()
    return None if code == 0 else f"its run ended with exit {code}"


def _answers_log(args: RaceArgs, engine: str) -> Path:
    return args.out / f"engine-{engine}-answers.log"


def _locust(args: RaceArgs, engine: str, *, users: int, requests: int, warmup: bool = False,
            warmup_log: Path | None = None, repeat: int | None = None, tag: str = TAG,
            workload: Mapping[str, Any] = WORKLOAD,
            run_options: Sequence[str] | None = None) -> Launched:
    """One run of the locustfile against the engine on args.port: the race's workload and run
    options unless given others. A warm-up's output goes to its log, a run's to this process's
    stdout and stderr."""
    spec = RunSpec.of(
        engine=engine, host=f"http://127.0.0.1:{args.port}", users=users, only_summary=True,
        out=args.out,  # flags: the engine's command, read from what the rig started there
        requests=requests, warmup=warmup, tag=None if warmup else tag, repeat=repeat,
        cpus=args.client_cpus or None,
        locust_options=tuple(args.run_options if run_options is None else run_options),
        **workload)
    print(f"+ {shlex.join(command(spec))}", file=sys.stderr)
    try:
        return run(spec, warmup_log)
    except (UnicodeDecodeError, csv.Error) as exc:  # runs.csv, read for the run's row
        raise EarlierRunsError(f"cannot read {spec.runs_csv}: {exc}") from None


def _did_not_run(race: Race, engine: str, reason: str) -> int:
    print(f"** {engine} did not run: {reason}; the race goes on without it", file=sys.stderr)
    race.did_not_run(engine, reason)
    return 1


def _report(out: Path, race: Race, rows: Sequence[dict[str, str]]) -> int:
    """Print the race of this race's heats (every demo run of them in `out`: earlier races
    count as repeats) and write out/report/; the report's exit status."""
    from loadtest.report.cli import main as report

    heats = sorted({f"{row['workload']}@{row['users']}" for row in rows
                    if row.get("tag") == TAG and row.get("users", "").isdigit()
                    and race.counts.get(int(row["users"])) == int(row["requests"] or 0)})
    if not heats:  # no engine ran: nothing to rank, and no table to draw
        for engine, why in race.out.items():
            print(f"{engine} did not run: {why}")
        return 0
    failed = [arg for engine, why in race.out.items() for arg in ("--failed", f"{engine}={why}")]
    sys.stdout.flush()
    return report([str(out), "--race", "--where", f"tag={TAG}",
                   "--where", "heat=" + "|".join(heats), *failed])


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def _users(counts: Sequence[int]) -> str:
    return f"{','.join(map(str, counts))} {'user' if list(counts) == [1] else 'users'}"


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    """SIGTERM ends the race as Ctrl-C does: the running engine is stopped on the way out."""
    raise KeyboardInterrupt
