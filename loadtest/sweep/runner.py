"""Run a sweep: for each engine configuration, start, warm up, measure every cell, stop.

Phases per configuration: skip what was measured before (same cell hash, same rig version,
row still in runs.csv) -> start the engine and wait for health -> one warm-up run (never in
runs.csv) -> one fresh Locust process per cell, one at a time -> stop the engine. An engine
that fails to start, crashes or times out is recorded as failed with its log's tail, and the
sweep goes on. SIGINT/SIGTERM stop the running cell and the engine, save sweep.json, exit 130.
With `interleave_repeats: together` the phases run side by side instead: every configuration
started at once (each on GPUs of its own), each warmed up, then one cell at a time in turn
(repeat 1 of a heat everywhere before its repeat 2), all stopped at the end.
With --until-known, passes of repeat legs follow: each configuration that must run a heat again
(loadtest/sweep/repeats.py decides) is started once per pass for its new cells, measured as
above, until every heat is known or capped; each heat's line ends the table.

Exit codes: 0 every cell measured, 1 some cells failed (recorded), 2 refused before starting,
130 interrupted (re-run the same command to resume).
"""

from __future__ import annotations

import contextlib
import shlex
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Iterator, Sequence

import pandas as pd

from loadtest.toolkit.repo import REPO
from servers.local import LOCAL
from loadtest.results.files import read_runs, write_csv
from loadtest.results.version import rig_version
from loadtest.workload.build import workload_sha256 as source_sha256
from servers.balancer import nginx_missing
from servers.registry import ENGINES

from loadtest.sweep.cells import Cell, again, config_hash, expand_cells, flags_text, run_flags
from loadtest.sweep.launch import EngineFailed, Launcher, make_launcher
from loadtest.sweep.matrix import EngineConfig, Matrix, MatrixError, SweepWorkload
from loadtest.launch import RunSpec, command, find_row, run, run_ids
from loadtest.sweep.measure import cell_spec
from loadtest.sweep.repeats import (Plan, UntilKnown, heat_of, heat_samples, known_lines,
                                    known_rows, next_pass)
from loadtest.sweep.state import MEASURED, SweepState
from loadtest.sweep.table import RULES, cell_frame, comparison_table, config_table

__all__ = ["preflight", "print_tables", "run_sweep", "schedule", "sweep_dir"]


# What `interleave_repeats: together` did, in the dry run's plan and above the tables.
TOGETHER = ("configurations started together, each on its own GPUs, and measured one cell at a "
            "time in turn while the others idled (repeats interleaved, no restart between them; "
            "every other repeat in the reverse order)")


def say(message: str) -> None:
    """Progress on stderr; a closed stderr (`| head`) must never stop the sweep cleaning up."""
    with contextlib.suppress(OSError):
        print(message, file=sys.stderr, flush=True)


def sweep_dir(out: Path, name: str) -> Path:
    return out / "sweeps" / name


def workload_sha256(matrix: Matrix, users: int, workload: SweepWorkload | None = None) -> str:
    """The hash each cell's run will record, known before any engine starts."""
    w = workload or matrix.workload
    return source_sha256(w.prompts, w.requests_at(users), max_tokens=w.max_tokens,
                         ignore_eos=w.ignore_eos, temperature=w.temperature,
                         source=w.options)


def preflight(matrix: Matrix, out: Path) -> None:
    """Refuse (MatrixError) what would fail for every cell: unwritable results, no engine to start."""
    folder = sweep_dir(out, matrix.name)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ".write-check").write_text("")
        (folder / ".write-check").unlink()
    except OSError as exc:
        raise MatrixError(f"cannot write the results folder {folder}: {exc.strerror}") from None
    launches = {c.launch for c in matrix.configs}
    for slug in sorted({c.engine for c in matrix.configs if c.launch == "local"}):
        why = LOCAL[slug].missing()
        if why:
            raise MatrixError(f"launch: local {slug}: {why}")
    if any(c.launch == "local" and c.replicas for c in matrix.configs):
        why = nginx_missing()
        if why:
            raise MatrixError(f"launch: local with replicas: {why}")
    if "compose" in launches:
        _check_docker(matrix)


def _check_docker(matrix: Matrix) -> None:
    try:
        import docker

        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure here means "no Docker engine"
        raise MatrixError(f"launch: compose needs a Docker engine ({type(exc).__name__}); "
                          "run: bash scripts/docker_setup.sh") from None
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0:
        raise MatrixError("launch: compose needs docker compose v2; run: bash scripts/docker_setup.sh")
    for config in matrix.configs:
        eng = ENGINES[config.engine]
        image = config.settings.get("IMAGE", eng.image)
        local_image = config.launch == "compose" and eng.service.get("pull_policy") == "never"
        if local_image and not client.images.list(name=image):
            raise MatrixError(f"no image {image} for {config.engine}: "
                              f"run: bash scripts/build_images.sh {config.engine}")


def run_sweep(matrix: Matrix, out: Path, kind: str, dry_run: bool = False,
              until: UntilKnown | None = None) -> int:
    """Measure every cell (then, with ``until``, repeat cells until known); the exit code."""
    started = time.monotonic()
    shas = {(w.label, u): workload_sha256(matrix, u, w)
            for w in matrix.all_workloads for u in matrix.users}
    plan = expand_cells(matrix, shas)
    folder = sweep_dir(out, matrix.name)
    if dry_run:
        _print_plan(matrix, plan, out, until)
        return 0
    preflight(matrix, out)
    version = rig_version()
    state = SweepState.open(folder / "sweep.json", {
        "name": matrix.name, "kind": kind, "status": "running", "rig_version": version,
        "results": str(out), "rules": RULES, "matrix": matrix.source})
    state.save()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        passes: dict[str, str] = {}  # this sweep's status of each configuration, over its starts
        if matrix.start_together:
            passes = _run_together(matrix, plan, out, state, version)
        else:
            for config, slug, cells in schedule(plan, matrix.interleave_repeats):
                passes[slug] = _run_config(matrix, config, slug, cells, out, state, version,
                                           passes.get(slug))
        if until is not None:
            def next_repeat(cell: Cell) -> Cell:
                return again(cell, cell.workload or matrix.workload, shas[heat_of(cell)])
            _until_known(matrix, plan, out, state, version, passes, until, started, next_repeat)
    except KeyboardInterrupt:
        state.data["status"] = "interrupted"
        state.save()
        say(f"interrupted: engine stopped (if the sweep started it), progress saved in {state.path}; "
            "run the same command again to resume")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    state.data["status"] = "complete"
    state.save()
    if until is None:  # an earlier --until-known's file would describe cells not shown now
        (folder / "known.csv").unlink(missing_ok=True)
    known = _record_known(state, plan, out, matrix, until) if until is not None else []
    if print_tables(state, plan, out, matrix, known, until):
        _report(out, matrix.name, folder)
    failed = [c for _, _, cells in plan for c in cells if state.cell(c).get("status") == "failed"]
    if failed:
        say(f"{len(failed)} cell(s) failed; reasons in {state.path}")
    return 1 if failed else 0


def _until_known(matrix: Matrix, plan: Plan, out: Path, state: SweepState, version: str,
                 passes: dict[str, str], until: UntilKnown, started: float,
                 next_repeat: Callable[[Cell], Cell]) -> None:
    """Passes of repeat legs, their cells added to ``plan``, until every heat is known, no
    contender is under --max-repeats, --max-time has passed, or a pass adds no ranked run."""
    seen = -1
    while True:
        heats = heat_samples(plan, _measured_rows(state, plan, out))
        ranked = sum(len(runs) for heat in heats.values() for runs in heat.values())
        legs = next_pass(plan, heats, until, next_repeat)
        if not legs or ranked == seen:
            return
        seen = ranked
        for config, slug, cells in legs:
            if until.max_time_s is not None and time.monotonic() - started > until.max_time_s:
                say(f"--max-time {until.max_time_s:g} s reached: no more repeats")
                return
            next(entry for entry in plan if entry[1] == slug)[2].extend(cells)
            say(f"{slug} runs {', '.join(c.name for c in cells)} again: not known yet")
            passes[slug] = _run_config(matrix, config, slug, cells, out, state, version,
                                       passes.get(slug))


def _measured_rows(state: SweepState, plan: Plan, out: Path) -> dict[str, dict[str, str]]:
    """{cell id: its runs.csv row} for the plan's measured cells."""
    rows = {row.get("run_id", ""): row for row in read_runs(out / "runs.csv")}
    return {cell.cell_id: rows[entry["run_id"]] for _, _, cells in plan for cell in cells
            if (entry := state.cell(cell)).get("status") in MEASURED
            and entry.get("run_id") in rows}


def _record_known(state: SweepState, plan: Plan, out: Path, matrix: Matrix,
                  until: UntilKnown) -> list[str]:
    """Each heat's standing in sweep.json and known.csv; its lines for the table."""
    heats = heat_samples(plan, _measured_rows(state, plan, out))
    configs = [slug for _, slug, _ in plan]
    rows = known_rows(heats, configs, until)
    state.data["until_known"] = {"max_repeats": until.max_repeats, "max_time_s": until.max_time_s,
                                 "resolve_pct": until.resolve_pct, "heats": rows}
    state.save()
    columns = list(rows[0]) if rows else ["workload"]
    write_csv(sweep_dir(out, matrix.name) / "known.csv", columns, rows)
    return known_lines(heats, configs, until)


def schedule(plan: Plan, interleave: bool) -> Plan:
    """The order engines start in: each configuration once with all its cells, or (interleaved)
    once per repeat, every configuration's repeat 1 before any repeat 2."""
    if not interleave:
        return plan
    repeats = sorted({cell.repeat for _, _, cells in plan for cell in cells})
    return [(config, slug, [c for c in cells if c.repeat == repeat])
            for repeat in repeats for config, slug, cells in plan]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """A second Ctrl-C (or SIGTERM) while an engine stops must not cut the stop short."""
    held = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)


def _run_config(matrix: Matrix, config: EngineConfig, slug: str, cells: list[Cell], out: Path,
                state: SweepState, version: str, earlier: str | None = None) -> str:
    """Start, measure ``cells``, stop; the configuration's status. ``earlier``: its status from
    an earlier start in this sweep (interleaved repeats start it once per repeat): a failure
    then stays recorded, and a start with nothing to do leaves that status as it was."""
    todo = _cells_to_run(state, cells, version, out)
    if not todo:
        return _nothing_to_run(state, config, slug, earlier)
    launcher = _prepare(matrix, config, slug, todo, out, state, earlier)
    try:
        say(f"start {slug}: {launcher.describe(matrix.health_timeout_s)}")
        launcher.start(matrix.health_timeout_s)
        say(f"healthy: {launcher.url}")
        _warm_up(matrix, config, slug, launcher, out, state)
        for cell in todo:
            _measure_or_fail_rest(matrix, cell, launcher, out, state, todo)
        status = "failed" if earlier == "failed" else "ok"
        state.set_config(slug, status=status)
    except EngineFailed as exc:
        status = _failed(state, slug, todo, exc)
    finally:
        _stop(slug, launcher)
    return status


def _run_together(matrix: Matrix, plan: Plan, out: Path, state: SweepState,
                  version: str) -> dict[str, str]:
    """`interleave_repeats: together`: every configuration with cells to run started at once
    (each on its own GPUs: the matrix checked), warmed up, then measured one cell at a time in
    turn, repeat 1 of a heat on every configuration before its repeat 2 (even repeats in the
    reverse order), the others idle beside the one measured; an engine that fails takes only its
    own cells with it; all stopped at the end. Repeats interleave as closely as they can, with
    no restart between them. Returns each configuration's status."""
    todo = {slug: _cells_to_run(state, cells, version, out) for _, slug, cells in plan}
    taken: set[int] = set()  # ports handed out: no two engines may pick the same free port
    launchers: dict[str, Launcher] = {}
    statuses: dict[str, str] = {}
    for config, slug, _ in plan:
        if todo[slug]:
            launchers[slug] = _prepare(matrix, config, slug, todo[slug], out, state, None, taken)
        else:
            statuses[slug] = _nothing_to_run(state, config, slug, None)
    configs = {slug: config for config, slug, _ in plan}
    # The starts' threads live until every engine stopped: an engine the rig starts gets SIGTERM
    # when the thread that started it ends (PR_SET_PDEATHSIG: loadtest/local_engine.py).
    pool = ThreadPoolExecutor(max(1, len(launchers)))
    try:
        for slug in _start_all(matrix, pool, launchers, configs, todo, out, state):
            statuses[slug] = "failed"
            del launchers[slug]
        heats = list(dict.fromkeys(heat_of(cell) for _, _, cells in plan for cell in cells))
        order = list(configs)
        # every other repeat in the reverse order, so no configuration always goes first
        turns = sorted((cell for slug in launchers for cell in todo[slug]),
                       key=lambda c: (c.repeat, heats.index(heat_of(c)),
                                      order.index(c.slug) * (1 if c.repeat % 2 else -1)))
        for index, cell in enumerate(turns):
            if cell.slug not in launchers:
                continue  # its engine failed: its cells are recorded failed
            its_turns = [c for c in turns[index:] if c.slug == cell.slug]
            try:
                _measure_or_fail_rest(matrix, cell, launchers[cell.slug], out, state, its_turns)
            except EngineFailed as exc:
                statuses[cell.slug] = _failed(state, cell.slug, todo[cell.slug], exc)
                _stop(cell.slug, launchers.pop(cell.slug))
        for slug in launchers:
            statuses[slug] = "ok"
            state.set_config(slug, status="ok")
    finally:
        for slug, launcher in launchers.items():
            _stop(slug, launcher)
        pool.shutdown(wait=False, cancel_futures=True)
    return statuses


def _start_all(matrix: Matrix, pool: ThreadPoolExecutor, launchers: dict[str, Launcher],
               configs: dict[str, EngineConfig], todo: dict[str, list[Cell]], out: Path,
               state: SweepState) -> list[str]:
    """Start ``launchers`` at once in ``pool``'s threads (a start waits minutes on a GPU), then
    warm each up in turn; the slugs that failed, recorded and stopped."""
    for slug, launcher in launchers.items():
        say(f"start {slug}: {launcher.describe(matrix.health_timeout_s)}")
    say(f"starting {len(launchers)} configuration(s) together; each is measured while the others idle")
    failed: list[str] = []
    starts = {slug: pool.submit(launcher.start, matrix.health_timeout_s)
              for slug, launcher in launchers.items()}
    for slug, started in starts.items():
        try:
            started.result()
            say(f"healthy {slug}: {launchers[slug].url}")
            _warm_up(matrix, configs[slug], slug, launchers[slug], out, state)
        except EngineFailed as exc:
            _failed(state, slug, todo[slug], exc)
            _stop(slug, launchers[slug])
            failed.append(slug)
    return failed


def _cells_to_run(state: SweepState, cells: list[Cell], version: str, out: Path) -> list[Cell]:
    """``cells`` not measured before (same cell, same rig version, row still in runs.csv)."""
    done = run_ids(out / "runs.csv")
    todo = []
    for cell in cells:
        skip, reason = state.resume_check(cell, version, done)
        if skip:
            state.set_cell(cell, status="skipped", reason=reason)
            say(f"skip {cell.path}: {reason}")
        else:
            todo.append(cell)
            if reason:
                say(f"run again {cell.path}: {reason}")
    return todo


def _config_info(config: EngineConfig) -> dict[str, Any]:
    return {"config_hash": config_hash(config), "engine": config.engine, "launch": config.launch,
            "settings": config.settings, "flags": flags_text(config), "gpus": config.gpus,
            "replicas": config.replicas}


def _nothing_to_run(state: SweepState, config: EngineConfig, slug: str, earlier: str | None) -> str:
    if earlier in (None, "skipped"):
        state.set_config(slug, **_config_info(config), status="skipped",
                         reason="every cell measured before")
        return "skipped"
    return earlier


def _prepare(matrix: Matrix, config: EngineConfig, slug: str, todo: list[Cell], out: Path,
             state: SweepState, earlier: str | None, taken: set[int] | None = None) -> Launcher:
    """The configuration's launcher, its state `starting` and its cells `pending`."""
    workdir = sweep_dir(out, matrix.name) / slug
    launcher = make_launcher(config, workdir, _project(matrix.name), matrix.client_processes, taken)
    kept = {} if earlier == "failed" else {"reason": "", "log_tail": ""}  # an earlier failure stays
    state.set_config(slug, **_config_info(config), status="starting", **kept,
                     engine_log=str(workdir / "engine.log") if config.launch != "running" else "")
    for cell in todo:
        state.set_cell(cell, status="pending", reason="")
    return launcher


def _failed(state: SweepState, slug: str, todo: list[Cell], exc: EngineFailed) -> str:
    """The configuration failed: recorded with its log's tail, its cells still pending failed."""
    say(f"failed {slug}: {exc.reason}\n{exc.log_tail}")
    state.set_config(slug, status="failed", reason=exc.reason, log_tail=exc.log_tail)
    for cell in todo:
        if state.cell(cell).get("status") == "pending":
            state.set_cell(cell, status="failed", reason=f"engine: {exc.reason}")
    return "failed"


def _stop(slug: str, launcher: Launcher) -> None:
    with _signals_held():
        launcher.stop()
    say(f"stopped {slug}")


def _warmup_spec(matrix: Matrix, config: EngineConfig, launcher: Launcher, out: Path) -> RunSpec:
    """The warm-up run after a start: the matrix's warm-up requests at its most users."""
    return cell_spec(engine=config.engine, url=launcher.url, engine_urls=launcher.engine_urls,
                     users=max(matrix.users), workload=matrix.workload, out=out, repeat=1,
                     tag=matrix.name, flags=run_flags(config), gpu=config.gpus,
                     processes=matrix.client_processes, warmup_requests=matrix.warmup_requests)


def _cell_run_spec(matrix: Matrix, cell: Cell, launcher: Launcher, out: Path) -> RunSpec:
    """One cell's measured run (the dry run prints the same)."""
    config = cell.config
    return cell_spec(engine=config.engine, url=launcher.url, engine_urls=launcher.engine_urls,
                     users=cell.users, workload=cell.workload or matrix.workload, out=out,
                     repeat=cell.repeat, tag=matrix.name, flags=run_flags(config),
                     gpu=config.gpus, processes=matrix.client_processes)


def _warm_up(matrix: Matrix, config: EngineConfig, slug: str, launcher: Launcher, out: Path,
             state: SweepState) -> None:
    if not matrix.warmup_requests:
        state.set_config(slug, warmup={"requests": 0})
        return
    users = max(matrix.users)
    spec = _warmup_spec(matrix, config, launcher, out)
    say(f"warm-up {slug}: {matrix.warmup_requests} requests at {users} users (not in runs.csv)")
    log = sweep_dir(out, matrix.name) / slug / "warmup.log"
    outcome = run(spec, log, matrix.run_timeout_s)
    state.set_config(slug, warmup={"requests": matrix.warmup_requests, "users": users,
                                   "exit_code": outcome.exit_code, "run_dir": outcome.run_dir,
                                   "log": str(log)})
    if outcome.exit_code not in (0, 1):
        why = launcher.failure() or outcome.error or f"exit {outcome.exit_code}"
        raise EngineFailed(f"warm-up failed: {why}", launcher.log_tail())


def _measure_or_fail_rest(matrix: Matrix, cell: Cell, launcher: Launcher, out: Path,
                          state: SweepState, todo: list[Cell]) -> None:
    """``_measure``; an engine that died in it fails the cells of ``todo`` still to come."""
    try:
        _measure(matrix, cell, launcher, out, state)
    except EngineFailed:
        for rest in todo[todo.index(cell) + 1:]:
            state.set_cell(rest, status="failed", reason="engine stopped before this cell")
        raise


def _measure(matrix: Matrix, cell: Cell, launcher: Launcher, out: Path, state: SweepState) -> None:
    runs_csv = out / "runs.csv"
    before = run_ids(runs_csv)
    spec = _cell_run_spec(matrix, cell, launcher, out)
    say(f"run {cell.path}")
    log = sweep_dir(out, matrix.name) / cell.path / "locust.log"
    try:
        outcome = run(spec, log, matrix.run_timeout_s)
    except KeyboardInterrupt:
        # An interrupted run adds no row; one that has a row had finished before the interrupt
        # reached the sweep: it is kept, so that a resumed sweep does not run it a second time.
        row = find_row(runs_csv, before)
        if row is not None:
            _record_ok(state, cell, row, exit_code=None, log=log)
        raise
    dead = launcher.failure()  # an engine that died mid-run fails the cell, whatever Locust saved
    row = outcome.row if outcome.exit_code in (0, 1) and not dead else None
    if row is not None:
        _record_ok(state, cell, row, exit_code=outcome.exit_code, log=log)
        return
    reason = outcome.error or f"Locust exit {outcome.exit_code} and no runs.csv row"
    state.set_cell(cell, status="failed", reason=f"engine: {dead}" if dead else reason,
                   exit_code=outcome.exit_code, log=str(log))
    say(f"  failed: {dead or reason}")
    if dead:
        raise EngineFailed(f"engine stopped during {cell.name}: {dead}", launcher.log_tail())


def _record_ok(state: SweepState, cell: Cell, row: dict[str, str], exit_code: int | None,
               log: Path) -> None:
    """``cell`` measured by ``row``; ``exit_code`` None: Locust was stopped after writing it."""
    failed = row.get("failed", "0") not in ("", "0")
    state.set_cell(cell, status="ok", reason="some requests failed" if failed else "",
                   run_id=row["run_id"], rig_version=row.get("rig_version", ""),
                   workload_sha256=row.get("workload_sha256", ""),
                   exit_code=exit_code if exit_code is not None else (1 if failed else 0),
                   completion_time_s=row.get("completion_time_s"),
                   output_tok_per_s=row.get("output_tok_per_s"), log=str(log))
    say(f"  ok: {row.get('completion_time_s')} s, {row.get('output_tok_per_s')} output tok/s")


def print_tables(state: SweepState, plan: Plan, out: Path, matrix: Matrix,
                 known: Sequence[str] = (), until: UntilKnown | None = None) -> int:
    """The sweep's tables on stdout (also saved as table.txt beside sweep.json), each heat's
    until-known line under them; the runs shown."""
    # several workloads: each (configuration, workload) is a table of its own
    config_of = {state.cell(c)["run_id"]: _table_key(slug, c) for _, slug, cells in plan for c in cells
                 if state.cell(c).get("status") in ("ok", "skipped") and state.cell(c).get("run_id")}
    runs = cell_frame(read_runs(out / "runs.csv"), config_of)
    lines = [f"sweep {matrix.name}: workload {w.label + ': ' if w.label else ''}{w.describe()}, "
             f"{matrix.repeats} repeat(s) per cell"
             + (f", {until.describe()}" if until is not None else "")
             for w in matrix.all_workloads]
    lines += [TOGETHER] if matrix.start_together else []
    for config, slug, cells in plan:
        entry = state.data["configs"].get(slug, {})
        lines += ["", f"== {slug}  [{flags_text(config) or 'engine defaults'}]"
                  + (f"  GPUs {config.gpus}" if config.gpus else ""), _warmup_line(entry)]
        if entry.get("status") == "failed":
            lines.append(f"FAILED: {entry.get('reason')} (log tail in sweep.json)")
        for key in dict.fromkeys(_table_key(slug, c) for c in cells):
            lines += [f"-- workload {key.split(' / ')[1]}"] if " / " in key else []
            lines.append(config_table(runs[runs["config"] == key]))
    if len(plan) > 1:
        lines += ["", "completion time by configuration (mean over repeats; * fastest per user count):"]
        lines += _comparisons(plan, runs)
    if known:
        lines += ["", "until known (output tok/s; the race's rule, loadtest/known.py; known.csv):",
                  *known]
    lines += ["", RULES]
    text = "\n".join(lines)
    (sweep_dir(out, matrix.name) / "table.txt").write_text(text + "\n")
    with contextlib.suppress(BrokenPipeError):
        print(text, flush=True)
    return len(runs)


def _comparisons(plan: Plan, runs: pd.DataFrame) -> list[str]:
    """One comparison table per workload: completion times of different workloads never meet."""
    keys: dict[str, dict[str, str]] = {}  # workload label -> {table key: configuration}
    for _, slug, cells in plan:
        for cell in cells:
            keys.setdefault(cell.workload.label if cell.workload else "", {})[_table_key(slug, cell)] = slug
    lines: list[str] = []
    for label, names in keys.items():
        lines += [f"-- workload {label}"] if len(keys) > 1 else []
        chosen = runs[runs["config"].isin(list(names))]
        lines.append(comparison_table(chosen.assign(config=chosen["config"].map(names))))
    return lines


def _table_key(slug: str, cell: Cell) -> str:
    return f"{slug} / {cell.workload.label}" if cell.workload is not None else slug


def _warmup_line(entry: dict[str, Any]) -> str:
    warmup = entry.get("warmup") or {}
    if entry.get("status") == "skipped":
        return "every cell measured before: not started again (warm-up as recorded then)"
    if not warmup.get("requests"):
        return "no warm-up"
    return (f"warmed up before measuring: {warmup['requests']} requests at {warmup.get('users')} users "
            f"(exit {warmup.get('exit_code')}; not in runs.csv)")


def _print_plan(matrix: Matrix, plan: Plan, out: Path, until: UntilKnown | None) -> None:
    total = sum(len(cells) for _, _, cells in plan)
    order = "; repeats interleaved (each configuration started once per repeat)" \
        if matrix.interleave_repeats else ""
    order = f"; {TOGETHER}" if matrix.start_together else order
    more = f"; then {until.describe()}" if until is not None else ""
    print(f"dry run: sweep {matrix.name}, {len(plan)} configuration(s), {total} cell(s){order}"
          f"{more}; nothing started")
    taken: set[int] = set()  # distinct ports, as engines started together need
    for config, slug, cells in plan if matrix.start_together else schedule(plan, matrix.interleave_repeats):
        launcher = make_launcher(config, sweep_dir(out, matrix.name) / slug, _project(matrix.name),
                                 matrix.client_processes, taken)
        print(f"\n== {slug}  [{flags_text(config) or 'engine defaults'}]  hash {config_hash(config)}")
        print(f"start: {launcher.describe(matrix.health_timeout_s)}")
        if matrix.warmup_requests:
            print(f"warm-up: {_show(command(_warmup_spec(matrix, config, launcher, out)))}")
        for cell in cells:
            spec = _cell_run_spec(matrix, cell, launcher, out)
            print(f"{cell.name} [{cell.cell_id}]: {_show(command(spec))}")
        print("stop" + ("" if config.launch != "running" else ": (not started here)"))


def _show(cmd: list[str]) -> str:
    """The command as a user would type it: `locust -f ...`."""
    return shlex.join(cmd[cmd.index("locust"):])


def _project(name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in name.lower())
    return f"llm-load-rig-sweep-{safe}"


def _report(out: Path, name: str, folder: Path) -> None:
    if not (REPO / "loadtest" / "report").is_dir():
        return
    # absolute: the report runs from the repository, --out may be relative to where we are
    cmd = [sys.executable, "-m", "loadtest.report", str(out.resolve()), "--where", f"tag={name}",
           "--out", str(folder.resolve() / "report")]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)
    except subprocess.TimeoutExpired:
        say("report: python -m loadtest.report timed out; run it yourself")
        return
    if result.returncode == 0:
        say(f"report: {folder / 'report' / 'report.md'}")
    else:
        lines = result.stderr.strip().splitlines()
        say(f"report: python -m loadtest.report failed: {lines[-1] if lines else result.returncode}")
