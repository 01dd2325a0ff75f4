"""The race's command line, checked: every option, the engines and the layout of cores are
worked out before anything is started or written, so bad input is one `error:` line and exit 2.

USERS and REQUESTS are the race's; anything after `--` and any option not the race's own is a
run option, passed to every run of the locustfile (the workload options among them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from loadtest.toolkit.args import RigParser, command_prog
from loadtest.toolkit.until_known import add_until_known, check_caps
from loadtest.toolkit.types import (BadValue, cpu_list, non_negative_int, port, positive_int,
                                    positive_int_list, writable_folder)
from loadtest.cpus import complete_layout
from loadtest.known import DEFAULT_MAX_REPEATS
from loadtest.race.plan import DEFAULT_USERS, MAX_TOKENS, PROMPTS, first_counts
from loadtest.race.run_options import (RunOptionError, check_values, locustfile_options,
                                       split_words)
from servers.local import LOCAL

__all__ = ["DEFAULT_ENGINES", "MAX_ANSWERS", "RaceArgs", "answer_count", "local_engines", "parser",
           "parse_args"]

T = TypeVar("T")

# The fastest here first (llama.cpp: 1.3-5.9x the others, evidence/2026-11-28/demo-answers):
# where its run is too short to rank, the heat is raised before the slower engines run it,
# so none of them runs it twice (plan.Race.legs: those before a raise catch up at the end).
DEFAULT_ENGINES = ("llamacpp-cpu", "vllm-cpu", "transformers")
# Options of the locustfile the race sets for every run itself; given again they would break
# the heats (one workload at one user count, the same requests for every engine).
RACE_OWNED = frozenset({"--host", "-H", "--users", "-u", "--engine", "--requests", "--out",
                        "--tag", "--warmup", "--flags"})
# The options of a run that the earlier-counts lookup understands (runs.csv's columns).
WORKLOAD_COLUMNS = {"--prompts": "prompts", "--max-tokens": "max_tokens"}
MAX_ANSWERS = 12  # graded prompts per engine in the answers leg: a side-by-side to read, not a score

DESCRIPTION = f"""\
USERS: the user counts, each a heat (default {','.join(map(str, DEFAULT_USERS))}); REQUESTS: the
requests of every run (default: chosen per user count); raised, given or not, where a run was too
short to rank.

Race local engines on one workload: each engine in turn on 127.0.0.1:PORT (start it, a warm-up
kept out of runs.csv, one run at each user count, tagged demo, stop it). Every engine gets the
same workload: the {PROMPTS} prompts, {MAX_TOKENS} output tokens (--ignore-eos), REQUESTS per run
(default: 4 per user, at least 144 (96 for one user), at most 256 or 2 per user: 96, 144, 144,
256 for the default users). A run under 5 s (too short to rank) is run again at once with more
requests; the engines after it run that count, those before it run it again at the end (so the
fastest engine goes first by default), and a re-run into the same DIR starts from those counts.

Engine and client never share a core: by default the client (Locust) runs on the first core and
each engine on the rest (--engine-cpus / --client-cpus change it, the other side gets the
remaining cores; --no-pin lets both use every core). An engine that fails to start is recorded
and the race goes on. Ends by printing the race table and the fastest engine at each user count,
and writes DIR/report/ (report.md, report.html, race.png). A re-run adds repeats to the race.

Repeats until the answer is known (--until-known): after the race, a heat whose leader is not
known is run again by its contenders, one leg per engine, until the leader (highest mean tok/s)
has 2 runs or more and a 95% t-interval on its lead over each other engine excludes 0, or an
engine has --max-repeats runs of it (default {DEFAULT_MAX_REPEATS}), or --max-time has passed since the race began.
Each heat's line says how many runs it took, or about how many more would resolve a difference of
--resolve-pct (default: the difference observed) from the spread seen.

Run options: any option of the locustfile (`locust -f loadtest/engines.py --help`, the
llm-load-rig groups) is passed to every run, here or after --, so a race can be run on any
workload: e.g. --workload synthetic --input-len 512, or --max-tokens 128. The race sets --host,
--users, --engine, --requests, --out, --tag, --warmup and --flags itself.

Answers (--answers N, default 0: none; scripts/demo.sh asks 4): after the speed heats, each
raced engine in turn serves SmolLM2-135M-Instruct, a real instruct model (llama.cpp its Q4_1 GGUF,
vLLM and transformers the bf16 folder: scripts/install.sh --model smollm2 makes them), answers
the first N prompts of the graded set (one user, chat, greedy, natural stops) and is stopped; the
race table is followed by the answers side by side, each graded right or wrong. It costs each
engine a start on that model (vLLM's is the longest, about a minute here) and N short answers; an
engine without its model is skipped, saying which command makes it, and one that fails there
leaves the race's result as it is.

Exit: 0 every engine ran every request, 1 an engine did not start or requests failed, 2 bad
arguments."""


@dataclass(frozen=True)
class RaceArgs:
    """The race as asked for, checked: nothing has been started or written yet."""
    engines: tuple[str, ...]
    users: tuple[int, ...]
    requests: int | None  # None: the race chooses; either way a count that ran too short is raised
    out: Path
    port: int
    engine_cpus: str  # "": not pinned
    client_cpus: str
    run_options: tuple[str, ...]  # passed to every run after the race's own
    dry_run: bool = False
    until_known: bool = False  # repeat unknown heats (loadtest/known.py)
    max_repeats: int = DEFAULT_MAX_REPEATS  # runs of one heat by one engine at most, with until_known
    max_time_s: float | None = None  # no repeat starts after this long since the race began
    resolve_pct: float | None = None  # runs needed for this difference; None: the one observed
    answers: int = 0  # graded prompts each engine answers on SmolLM2 after the heats; 0: none

    @property
    def workload_columns(self) -> dict[str, str] | None:
        """runs.csv column values that identify this race's workload apart from its request
        count (an earlier race's larger counts are reused only on the same workload); None when
        the run options change the workload in a way those columns do not record."""
        columns = {"prompts": PROMPTS, "max_tokens": str(MAX_TOKENS)}
        options = list(self.run_options)
        while options:
            name, _, value = options.pop(0).partition("=")
            if name not in WORKLOAD_COLUMNS or not (value or options):
                return None
            columns[WORKLOAD_COLUMNS[name]] = value or options.pop(0)
        return columns


def parser() -> RigParser:
    """The race's own options (run options are read apart: split_words)."""
    prog = command_prog("python -m loadtest.race")
    race = RigParser(prog=prog, description=DESCRIPTION,
                     epilog="examples:\n  rig race                                      # the demo's race\n"
                            "  rig race --engines vllm-cpu,llamacpp-cpu 8,32 --workload synthetic "
                            "--input-len 2048 --output-len 32 --ignore-eos\n"
                            "  rig race --dry-run                            # the plan; starts nothing\n"
                            "  rig race --engines llamacpp-cpu,vllm-cpu 8 --until-known --max-repeats 4\n"
                            "exit: 0 every engine ran every request, 1 an engine did not run or "
                            "requests failed, 2 bad arguments, 130 interrupted",
                     usage=f"{prog} [--engines E[,E...]] [--out DIR] [--port P] "
                           "[--engine-cpus L]\n       [--client-cpus L] [--no-pin] [--dry-run] "
                           "[USERS[,USERS...] [REQUESTS]]\n       [--until-known [--max-repeats N] "
                           "[--max-time S] [--resolve-pct X]]\n       [RUN OPTIONS] [-- RUN OPTIONS]")
    race.add_argument("--engines", default=",".join(DEFAULT_ENGINES),
                      help=f"local engines to race, in this order (default "
                           f"{','.join(DEFAULT_ENGINES)})")
    race.add_argument("--out", type=writable_folder, default=Path("results"),
                      help="results folder (default results/)")
    race.add_argument("--port", type=port, default=8000,
                      help="the port each engine serves on (default 8000)")
    race.add_argument("--engine-cpus", type=cpu_list, metavar="L",
                      help="the engines' cores, a CPU list (default: all but the first)")
    race.add_argument("--client-cpus", type=cpu_list, metavar="L",
                      help="the client's cores (default: the first)")
    race.add_argument("--no-pin", action="store_true",
                      help="pin nothing: engine and client share every core")
    race.add_argument("--dry-run", action="store_true",
                      help="check the arguments, print the plan, start nothing")
    race.add_argument("--answers", type=answer_count, default=0, metavar="N",
                      help="after the heats, each engine answers the first N graded prompts on "
                           f"SmolLM2-135M-Instruct, shown side by side (0-{MAX_ANSWERS}; default "
                           "0: none); costs each engine one more start, vLLM's about a minute")
    add_until_known(race, heat="heat", rival="engine", span="race")
    return race


def answer_count(text: str) -> int:
    """--answers: 0 (none) to MAX_ANSWERS prompts."""
    count = non_negative_int(text)
    if count > MAX_ANSWERS:
        raise BadValue(f"must be 0 to {MAX_ANSWERS} (prompts each engine answers), got {text!r}")
    return count


def parse_args(argv: Sequence[str]) -> RaceArgs:
    """The checked race; one `error:` line and exit 2 (SystemExit) on bad input."""
    race = parser()
    argv = list(argv)
    tail = argv[argv.index("--") + 1:] if "--" in argv else []
    head = argv[:argv.index("--")] if "--" in argv else argv
    args, unknown = race.parse_known_args(head)
    known = locustfile_options()
    try:
        positional, passed = split_words(unknown, known)
        stray, after = split_words(tail, known)
    except RunOptionError as exc:
        race.error(str(exc))
    if stray:
        race.error(f"{stray[0]!r} after -- is not a run option's value")
    run_options = (*passed, *after)
    owned = sorted({o.partition("=")[0] for o in run_options} & RACE_OWNED)
    if owned:
        race.error(f"{owned[0]} is set by the race itself; the run options may not change it")
    if len(positional) > 2:
        race.error("at most two arguments, USERS and REQUESTS")
    users = _checked(race, "USERS", positive_int_list, positional[0]) \
        if positional else list(DEFAULT_USERS)
    requests = _checked(race, "REQUESTS", positive_int, positional[1]) \
        if len(positional) > 1 else None
    if args.no_pin and (args.engine_cpus or args.client_cpus):
        race.error("--no-pin and --engine-cpus/--client-cpus exclude each other")
    engine_cpus, client_cpus = ("", "")
    if not args.no_pin:
        try:
            engine_cpus, client_cpus = complete_layout(args.engine_cpus or "",
                                                       args.client_cpus or "")
        except ValueError as exc:
            race.error(str(exc))
    check_caps(race, args)
    engines = local_engines(race, args.engines)
    try:
        check_values(run_options, engines, args.port, max(first_counts(users, requests).values()))
    except RunOptionError as exc:
        race.error(str(exc))
    if "--repeat" in {o.partition("=")[0] for o in run_options} and args.until_known:
        race.error("--repeat is set by --until-known itself; the run options may not change it")
    return RaceArgs(engines=engines, users=tuple(users),
                    requests=requests, out=args.out, port=args.port, engine_cpus=engine_cpus,
                    client_cpus=client_cpus, run_options=tuple(run_options),
                    dry_run=args.dry_run, until_known=args.until_known,
                    max_repeats=args.max_repeats or DEFAULT_MAX_REPEATS, max_time_s=args.max_time,
                    resolve_pct=args.resolve_pct, answers=args.answers)


def _checked(parser: RigParser, name: str, kind: Callable[[str], T], text: str) -> T:
    try:
        return kind(text)
    except BadValue as exc:
        parser.error(f"{name} {exc}")


def local_engines(parser: RigParser, text: str) -> tuple[str, ...]:
    """The comma list of engines, each with a local recipe, none twice."""
    engines = tuple(text.split(","))
    unknown = [engine for engine in engines if engine not in LOCAL]
    if not text or unknown:
        parser.error(f"--engines: no local engine {(unknown or [text])[0]!r}; local engines: "
                     f"{', '.join(LOCAL)}")
    if len(set(engines)) != len(engines):
        parser.error("--engines names an engine twice")
    return engines
