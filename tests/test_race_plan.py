"""The race's planning (loadtest/race/plan.py) on made-up runs, and its command line
(loadtest/race/args.py): heats, raised counts, order, catch-up, engines that do not start, bad
input. Nothing here starts an engine or Locust."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Collection, Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rig_helpers import REPO

from loadtest.race.args import DEFAULT_ENGINES, RACE_OWNED, parse_args
from loadtest.known import MIN_RUNS, ahead, repeat_plan, runs_to_resolve, standing, t95
from loadtest.race.plan import (CATCH_UP_PASSES, DEFAULT_USERS, MAX_TRIES, Race,
                                default_requests, earlier_counts, first_counts, raised_counts)
from loadtest.race.run_options import RunOptionError, locustfile_options, split_words

SHORT_S = 5.0  # the verdict's short_run threshold
# The counts the made-up paces below are written against (the defaults of an earlier tuning):
# the order and catch-up rules do not depend on which counts a race starts from.
COUNTS = {1: 56, 8: 96, 32: 128}

Run = tuple[str, int, int]  # (engine, users, requests), in the order they ran


def race_runs(race: Race, seconds_per_request: Mapping[tuple[str, int], float],
              not_starting: Collection[str] = (), failing: Collection[tuple[str, int]] = ()
              ) -> list[Run]:
    """Walk ``race`` as loadtest/race/execute.py does, each run lasting its requests times the
    engine's seconds per request at that user count (under 5 s: short_run); engines in
    ``not_starting`` do not start, (engine, users) in ``failing`` cannot run."""
    runs: list[Run] = []
    for leg in race.legs():
        if leg.engine in not_starting:
            race.did_not_run(leg.engine, "did not start")
            continue
        for users in race.runs(leg):
            if (leg.engine, users) in failing:
                race.did_not_run(leg.engine, f"its run at {users} users could not run (exit 2)")
                break
            requests = race.counts[users]
            runs.append((leg.engine, users, requests))
            seconds = requests * seconds_per_request[leg.engine, users]
            race.record(leg.engine, users, [_row(users, requests, seconds)])
    return runs


def _row(users: int, requests: int, seconds: float, failed: int = 0) -> dict[str, str]:
    reasons = ["failed_requests"] * bool(failed) + ["short_run"] * (seconds < SHORT_S)
    return {"users": str(users), "requests": str(requests), "completion_time_s": f"{seconds:.3f}",
            "verdict_reasons": ";".join(reasons), "failed": str(failed)}


def _speeds(engines: dict[str, float], users: tuple[int, ...]) -> dict[tuple[str, int], float]:
    """Every engine as fast at every user count: seconds per request."""
    return {(engine, count): s for engine, s in engines.items() for count in users}


# --- the heats' first counts ---------------------------------------------------------------

def test_the_default_heats_are_96_144_144_and_256_requests():
    assert first_counts(DEFAULT_USERS) == {1: 96, 8: 144, 32: 144, 128: 256}


@given(st.integers(1, 10_000))
def test_a_default_count_is_4_per_user_within_its_floor_and_cap(users: int):
    count = default_requests(users)
    assert (96 if users == 1 else 144) <= count or count == max(2 * users, 256)
    assert count <= max(2 * users, 256)
    assert default_requests(users + 1) >= count  # more users never get fewer requests


@given(st.lists(st.integers(1, 512), min_size=1, max_size=6, unique=True),
       st.integers(1, 100_000))
def test_a_given_count_is_every_heats_and_raised_only_where_a_run_was_too_short(
        users: list[int], requests: int):
    """A count the user gave is kept where every run lasts long enough to rank, and raised where
    one does not, as a count the race chose would be: a short run has no place in a heat."""
    race = Race(["a", "b"], users, first_counts(users, requests, {u: 10**6 for u in users}))
    runs = race_runs(race, _speeds({"a": 10.0, "b": 10.0}, tuple(users)))  # no run short
    assert {count for _, _, count in runs} == {requests}
    assert len(runs) == 2 * len(users)  # nothing ran twice
    race = Race(["a", "b"], users, first_counts(users, requests))
    runs = race_runs(race, _speeds({"a": 1e-6, "b": 10.0}, tuple(users)))  # a's runs short
    assert all(count > requests for engine, _, count in runs if engine == "b")
    assert all(race.counts[count] > requests for count in users)


def test_a_rerun_starts_from_the_larger_counts_an_earlier_race_ran():
    def row(users: str, prompts: str, requests: str, max_tokens: str) -> dict[str, str]:
        return {"users": users, "prompts": prompts, "requests": requests, "max_tokens": max_tokens}

    rows = [row("1", "mixed", "56", "64"), row("1", "mixed", "224", "64"),
            row("8", "mixed", "96", "64"), row("8", "mixed", "512", "128"),
            row("32", "story", "512", "64"), row("32", "mixed", "40", "64")]
    earlier = earlier_counts(rows, "mixed", 64)
    assert earlier == {1: 224, 8: 96, 32: 40}
    assert first_counts([1, 8, 32], earlier=earlier) == {1: 224, 8: 144, 32: 144}


# --- raised counts ---------------------------------------------------------------------------

def test_heats_with_a_run_too_short_to_rank_are_planned_again_with_more_requests():
    """Seen on a faster machine than the demo's counts were tuned on: vLLM's run at 32 users took
    2.8 s (invalid: short_run), so only transformers was ranked there."""
    rows = [{"users": "1", "requests": "56", "completion_time_s": "11.3", "verdict_reasons": ""},
            {"users": "1", "requests": "56", "completion_time_s": "2.39",
             "verdict_reasons": "short_run"},
            {"users": "32", "requests": "128", "completion_time_s": "2.82",
             "verdict_reasons": "client_overloaded;short_run"},
            {"users": "32", "requests": "128", "completion_time_s": "4.8",
             "verdict_reasons": "short_run"},
            {"users": "32", "requests": "128", "completion_time_s": "6.0", "verdict_reasons": ""},
            {"users": "128", "requests": "256", "completion_time_s": "4.9",
             "verdict_reasons": "short_run"},
            {"users": "8", "requests": "96", "completion_time_s": "6.7", "verdict_reasons": ""}]
    # the shortest run at each count lasts 6.5 s or more with a whole multiple (at least 2x)
    assert raised_counts(rows) == {1: 56 * 3, 32: 128 * 3, 128: 256 * 2}
    assert raised_counts(rows[-1:]) == {}


def test_short_runs_of_different_counts_are_all_covered_and_failed_runs_ask_for_nothing():
    """Short runs of two counts at one user count (an engine that ran a count already raised for
    a faster one): vLLM's 96 requests in 4.8 s ask for 192, llama.cpp's 192 in 4.9 s for 384,
    and the heat takes the larger. A run whose requests failed (an engine that answered errors
    at once) says nothing about the count."""
    rows = [_row(8, 96, 4.8), _row(8, 192, 4.9), _row(8, 192, 6.9), _row(1, 56, 0.3, failed=56)]
    assert raised_counts(rows) == {8: 384}
    assert raised_counts(rows[1:]) == {8: 384} and raised_counts(rows[:1]) == {8: 192}


@given(st.integers(1, 4096), st.floats(0.0, 4.999))
def test_a_raised_count_lasts_the_target_at_the_run_s_pace(requests: int, seconds: float):
    raised = raised_counts([_row(8, requests, seconds)])[8]
    assert raised % requests == 0 and raised >= 2 * requests
    recorded = float(f"{seconds:.3f}")  # the plan reads the row's time, as runs.csv rounds it
    assert raised / requests * max(recorded, 0.1) >= 6.5 - 1e-9


# --- order and catch-up ----------------------------------------------------------------------

def test_every_engine_runs_every_heat_once_in_rising_order_when_none_is_short():
    race = Race(["vllm-cpu", "llamacpp-cpu", "transformers"], [32, 1, 8], COUNTS)
    runs = race_runs(race, _speeds({"vllm-cpu": 1.0, "llamacpp-cpu": 1.0, "transformers": 1.0},
                                   (1, 8, 32)))
    assert runs == [(e, u, COUNTS[u])
                    for e in ("vllm-cpu", "llamacpp-cpu", "transformers") for u in (1, 8, 32)]


def test_a_short_run_is_run_again_at_once_and_the_engines_before_it_catch_up_at_the_end():
    """The demo's earlier race here: llama.cpp runs 56 requests at one user in about 2 s
    (short_run): it runs 168 at once, before its next user count; transformers, after it, runs
    168 from the start; vLLM, before it, runs one user again at the end."""
    speeds = _speeds({"vllm-cpu": 0.2, "transformers": 0.3}, (1, 8))
    speeds |= {("llamacpp-cpu", 1): 0.04, ("llamacpp-cpu", 8): 0.1}
    race = Race(["vllm-cpu", "llamacpp-cpu", "transformers"], [1, 8], COUNTS)
    assert race_runs(race, speeds) == [
        ("vllm-cpu", 1, 56), ("vllm-cpu", 8, 96),
        ("llamacpp-cpu", 1, 56), ("llamacpp-cpu", 1, 168), ("llamacpp-cpu", 8, 96),
        ("transformers", 1, 168), ("transformers", 8, 96),
        ("vllm-cpu", 1, 168)]
    assert race.counts == {1: 168, 8: 96}
    assert all(race.behind(engine) == () for engine in race.engines)  # nobody is behind


def test_the_default_order_starts_with_the_fastest_engine_so_no_heat_is_caught_up():
    """The demo's engines at this machine's relative paces (llama.cpp 1.3-5.9x the others) on a
    machine fast enough that llama.cpp's default runs are short: only llama.cpp runs a heat twice,
    at once; vLLM and transformers run each heat once, with its raised count."""
    users = (1, 8, 32, 128)
    speeds = _speeds({"vllm-cpu": 0.2, "transformers": 0.3}, users)
    speeds |= {("llamacpp-cpu", count): 0.03 for count in users}
    race = Race(DEFAULT_ENGINES, users, first_counts(users))
    runs = race_runs(race, speeds)
    assert DEFAULT_ENGINES[0] == "llamacpp-cpu" and not any(leg.catch_up for leg in race.legs())
    for engine in ("vllm-cpu", "transformers"):
        assert [(u, n) for e, u, n in runs if e == engine] == sorted(race.counts.items())
    assert len(runs) == 3 * len(users) + len(race.counts.keys() - {128})  # llama.cpp's re-runs


def test_one_engine_runs_a_heat_at_most_three_times_in_a_row():
    """An engine whose every run lasts 1 s, however many requests: each short run asks for
    7x its count; the third run is short too but raises nothing."""
    race = Race(["fast"], [1], COUNTS)
    runs: list[Run] = []
    for leg in race.legs():
        for users in race.runs(leg):
            runs.append((leg.engine, users, race.counts[users]))
            race.record(leg.engine, users, [_row(users, race.counts[users], 1.0)])
    assert runs == [("fast", 1, 56), ("fast", 1, 392), ("fast", 1, 2744)]
    assert len(runs) == MAX_TRIES and race.counts == {1: 2744}


def test_a_count_raised_while_catching_up_is_caught_up_once_more():
    """c's 56 requests at one user are short: 168. Catching up, b is short at 168 (a faster pace
    at that count): 336, which c after it runs in the same pass and a, before it, in a second
    pass."""
    race = Race(["a", "b", "c"], [1], COUNTS)
    runs: list[Run] = []
    for leg in race.legs():
        for users in race.runs(leg):
            requests = race.counts[users]
            runs.append((leg.engine, users, requests))
            pace = {"a": 0.1, "b": 0.1 if requests <= 56 else 0.02, "c": 0.05}[leg.engine]
            race.record(leg.engine, users, [_row(users, requests, requests * pace)])
    assert runs == [("a", 1, 56), ("b", 1, 56), ("c", 1, 56), ("c", 1, 168),
                    ("a", 1, 168), ("b", 1, 168), ("b", 1, 336), ("c", 1, 336),
                    ("a", 1, 336)]
    assert CATCH_UP_PASSES == 2 and race.counts == {1: 336}


def test_an_engine_that_does_not_start_is_out_and_the_race_goes_on():
    speeds = _speeds({"vllm-cpu": 0.04, "transformers": 0.3, "llamacpp-cpu": 0.3}, (1, 8))
    race = Race(["transformers", "llamacpp-cpu", "vllm-cpu"], [1, 8], COUNTS)
    runs = race_runs(race, speeds, not_starting={"llamacpp-cpu"})
    assert "llamacpp-cpu" not in {engine for engine, _, _ in runs}
    assert race.out == {"llamacpp-cpu": "did not start"}
    assert runs[-1] == ("transformers", 8, race.counts[8])  # transformers caught up alone


def test_an_engine_whose_run_cannot_run_stops_there_and_never_catches_up():
    speeds = _speeds({"a": 0.3, "b": 0.01}, (1, 8))
    race = Race(["a", "b"], [1, 8], COUNTS)
    runs = race_runs(race, speeds, failing={("a", 8)})
    assert [r for r in runs if r[0] == "a"] == [("a", 1, 56)]  # no catch-up at 1 user
    assert "a" in race.out and race.behind("a") == (1, 8)


@settings(max_examples=200, deadline=None)
@given(engines=st.lists(st.sampled_from(["v", "l", "t", "x"]), min_size=1, max_size=4,
                        unique=True),
       users=st.lists(st.sampled_from([1, 2, 4, 8, 32, 128]), min_size=1, max_size=4,
                      unique=True),
       pace=st.dictionaries(st.sampled_from(["v", "l", "t", "x"]),
                            st.floats(0.001, 0.5), min_size=4),
       not_starting=st.sets(st.sampled_from(["v", "l", "t", "x"]), max_size=2))
def test_every_engine_in_the_race_ends_on_each_heat_s_final_count(
        engines: list[str], users: list[int], pace: dict[str, float], not_starting: set[str]):
    """Whatever the engines' paces (seconds per request), each engine that started ran each heat
    last with the heat's final count, in rising user order within each start, no heat more than
    MAX_TRIES times in a row, and counts never went down."""
    race = Race(engines, users, first_counts(users))
    runs = race_runs(race, {(e, u): pace[e] for e in engines for u in users}, not_starting)
    assert set(race.out) == not_starting & set(engines)
    for engine in set(engines) - not_starting:
        assert race.behind(engine) == (), (engine, runs)
    last: dict[int, int] = {}
    streak: list[Run] = []
    for run in runs:
        assert run[2] >= last.get(run[1], 0)  # a heat's count only grows
        last[run[1]] = run[2]
        streak = [*streak, run] if streak and streak[-1][:2] == run[:2] else [run]
        assert len(streak) <= MAX_TRIES


# --- the command line --------------------------------------------------------------------------

def test_unknown_options_and_values_are_passed_to_every_run_and_users_found_among_them(
        tmp_path: Path):
    args = parse_args(["--out", str(tmp_path), "--workload", "synthetic", "--input-len", "512",
                       "1,8", "64", "--recount", "--", "--rate=2"])
    assert (args.users, args.requests) == ((1, 8), 64)
    assert args.run_options == ("--workload", "synthetic", "--input-len", "512", "--recount",
                                "--rate=2")
    assert args.workload_columns is None  # the earlier counts cannot tell this workload apart
    assert parse_args(["--max-tokens", "128", "--out", str(tmp_path)]).workload_columns == {
        "prompts": "mixed", "max_tokens": "128"}


def test_without_the_locustfile_s_options_any_option_passes_and_takes_the_next_word():
    """scripts/demo.sh's check before installing: the names are checked again by the race."""
    assert split_words(["--input-len", "512", "1,8", "--x=1", "64", "--flag", "-v"], None) == (
        ["1,8", "64"], ["--input-len", "512", "--x=1", "--flag", "-v"])
    with pytest.raises(RunOptionError):
        split_words(["--recount", "--no-such"], locustfile_options())


def test_the_race_knows_every_option_the_locustfile_takes():
    """loadtest/race/run_options.py builds its list from add_locustfile_options, the function
    loadtest/engines.py registers on Locust's parser: both name the same options."""
    code = ("import argparse, json, loadtest.engines as e; p = argparse.ArgumentParser("
            "add_help=False); e._add_options(p); print(json.dumps(sorted(o for a in p._actions "
            "for o in a.option_strings)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120, check=True)
    known = locustfile_options()
    assert known is not None and sorted(known) == json.loads(done.stdout)
    assert RACE_OWNED - {"-H", "-u", "--host", "--users"} <= set(known)


_OPTIONS = ["--engines", "--out", "--port", "--engine-cpus", "--client-cpus"]


def _pair(option: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    return values.map(lambda value: [option, value])


_NOT_A_PORT = st.one_of(st.integers(max_value=0), st.integers(min_value=65536)).map(str) | \
    st.text(min_size=1).filter(  # "+1" is port 1, as for every whole-number option
        lambda t: not t.strip().lstrip("+").isdigit() and not t.startswith("-"))
_NOT_CORES = st.integers(min_value=64).map(str) | st.sampled_from(["a", "3-1", "0,", "x-2", ""])
_NOT_ENGINES = st.text(min_size=1).filter(
    lambda t: not t.startswith("-") and bool(set(t.split(",")) - {"vllm-cpu", "transformers"}))
_NOT_USERS = st.text(min_size=1).filter(
    lambda t: not t.startswith("-") and not t.replace(",", "").isdigit())
_BAD_ARGS = st.one_of(
    _pair("--port", _NOT_A_PORT),
    _pair("--engine-cpus", _NOT_CORES), _pair("--client-cpus", _NOT_CORES),
    _pair("--engines", _NOT_ENGINES),
    _NOT_USERS.map(lambda users: [users]),
    st.integers(max_value=0).map(lambda requests: ["1", str(requests)]),
    st.lists(st.integers(1, 9).map(str), min_size=3, max_size=4),  # a third positional
    # a run option's value that `rig run` refuses, refused by the race before any engine starts
    _pair("--max-tokens", st.integers(max_value=0).map(str) | st.sampled_from(["x", "1.5"])),
    _pair("--rate", st.sampled_from(["x", "-1", "0", "inf", "nan"])),
    _pair("--input-len", st.sampled_from(["abc", "0", "5-2", "normal:x"])).map(
        lambda pair: ["--workload", "synthetic", *pair]),
    st.sampled_from([["--bogus"], ["--engines"], ["--no-pin", "--client-cpus", "0"],
                     ["--requests", "5"], ["--", "--host=http://x"], ["1,1"],
                     ["--max-tokens"], ["--ignore-eos=1"], ["1", "--", "3"],
                     ["--until-known", "--max-repeats", "0"], ["--max-repeats", "3"],
                     ["--until-known", "--max-time", "0"], ["--max-time", "60"],
                     ["--until-known", "--resolve-pct", "0"], ["--resolve-pct", "5"],
                     ["--until-known", "--repeat", "2"]]))


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # capsys: read each time
@given(args=_BAD_ARGS)
def test_bad_arguments_are_one_error_line_and_exit_2(
        args: list[str], tmp_path_factory: pytest.TempPathFactory,
        capsys: pytest.CaptureFixture[str]):
    out = tmp_path_factory.mktemp("race") / "results"
    with pytest.raises(SystemExit) as exited:
        parse_args(["--out", str(out), *args])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert not out.exists()  # nothing written


def test_a_dry_run_prints_the_plan_and_starts_nothing(tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "loadtest.race", "--dry-run", "--out",
                           str(tmp_path / "r"), "--engines", "transformers", "--no-pin", "1,4"],
                          capture_output=True, text=True, cwd=REPO, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "heats (users x requests): 1 user x 96, 4 users x 144" in done.stdout
    assert "layout: engine on cores any, client on cores any" in done.stdout
    assert not (tmp_path / "r").exists()


def test_help_exits_0_and_names_the_options():
    parser_help = subprocess.run([sys.executable, "-m", "loadtest.race", "--help"],
                                 capture_output=True, text=True, cwd=REPO, timeout=60,
                                 check=False)
    assert parser_help.returncode == 0
    assert parser_help.stdout.startswith("usage: python -m loadtest.race")
    assert all(option in parser_help.stdout for option in _OPTIONS + ["--no-pin", "Exit:"])


# --- repeats until the answer is known (loadtest/known.py) -------------------------------

_TOK_S = st.floats(min_value=1, max_value=5000, allow_nan=False)
_SAMPLES = st.dictionaries(st.sampled_from(["vllm-cpu", "llamacpp-cpu", "transformers"]),
                           st.lists(_TOK_S, min_size=1, max_size=6), min_size=1)


@given(samples=_SAMPLES)
def test_a_heat_is_known_only_when_the_leader_is_ahead_of_every_other_engine(samples):
    heat = standing(samples)
    others = [engine for engine in samples if engine != heat.leader]
    assert heat.known == all(ahead(samples[heat.leader], samples[e]) for e in others)
    assert heat.known == (heat.contenders == ())
    if not heat.known:
        assert heat.leader in heat.contenders
        assert all(len(samples[e]) >= MIN_RUNS for e in others if e not in heat.contenders)


@given(a=st.lists(_TOK_S, min_size=2, max_size=8), b=st.lists(_TOK_S, min_size=2, max_size=8))
def test_ahead_is_the_welch_interval_and_never_both_ways(a, b):
    assert not (ahead(a, b) and ahead(b, a))
    if min(a) > max(b) and len(a) >= 3 and len(b) >= 3 and max(a) - min(a) < min(a) - max(b):
        assert ahead(a, b)  # far apart, little spread


def test_more_runs_resolve_what_two_could_not():
    assert not ahead([1000, 1100], [1050, 900])  # means 1050 vs 975: too noisy at 2 runs
    assert ahead([1000, 1100, 1090, 1060, 1080, 1070], [1050, 900, 950, 960, 940, 970])


def _walk(means: dict[str, float], noise: float, max_repeats: int,
          seed: int) -> dict[str, list[float]]:
    """Repeat one heat as execute.py does: every engine once, then repeat_plan's legs."""
    import random

    draw = random.Random(seed)
    runs = {engine: [mean + draw.uniform(-noise, noise)] for engine, mean in means.items()}
    for _ in range(100):
        plan = repeat_plan({8: runs}, list(means), max_repeats)
        if not plan:
            return runs
        for engine, users in plan:
            assert users == (8,)
            runs[engine].append(means[engine] + draw.uniform(-noise, noise))
    raise AssertionError("repeat_plan never ended")


@given(means=st.dictionaries(st.sampled_from(["a", "b", "c"]), _TOK_S, min_size=2),
       noise=st.floats(0, 200), max_repeats=st.integers(1, 8), seed=st.integers(0, 99))
def test_repeats_end_known_or_at_the_cap_and_never_past_it(means, noise, max_repeats, seed):
    runs = _walk(means, noise, max_repeats, seed)
    heat = standing(runs)
    assert all(len(r) <= max(max_repeats, 1) for r in runs.values())
    if not heat.known:  # capped: some contender ran the heat max_repeats times
        assert any(len(runs[engine]) >= max_repeats for engine in heat.contenders)


@given(gap=st.floats(0.2, 1), seed=st.integers(0, 99))
def test_a_leader_ahead_by_more_than_the_noise_is_known_after_two_runs_each(gap, seed):
    noise = 10.0
    runs = _walk({"a": 1000, "b": 1000 * (1 - gap) - 2 * noise}, noise, 5, seed)
    assert standing(runs).known and {len(r) for r in runs.values()} == {MIN_RUNS}


@given(spread=st.floats(0.1, 100), mean=st.floats(100, 5000), pct=st.floats(0.5, 50))
def test_runs_to_resolve_make_the_t_interval_narrower_than_the_difference(spread, mean, pct):
    n = runs_to_resolve(spread, mean, pct)
    difference = mean * pct / 100
    assert n is not None and n >= MIN_RUNS
    assert t95(2 * n - 2) * spread * (2 / n) ** 0.5 < difference
    if n > MIN_RUNS:  # and one fewer would not do
        assert t95(2 * n - 4) * spread * (2 / (n - 1)) ** 0.5 >= difference


def test_single_runs_have_no_spread_to_judge_by():
    heat = standing({"a": [100.0], "b": [90.0]})
    assert not heat.known and set(heat.contenders) == {"a", "b"}
    assert runs_to_resolve(heat.spread, heat.runner_up_mean, 5) is None


@pytest.mark.parametrize("llamacpp, vllm, said", [
    # means 1035 vs 1015 in a spread of ~80: capped at 4 runs each
    ([1000, 1100, 1020, 1020], [1040, 900, 1060, 1060], "NOT known (capped); about"),
    # clearly apart: known after 2 runs each, 4 in all
    ([1000, 1010], [900, 905], "known after 4 runs"),
    # too noisy at 2 runs, known at 4
    ([1000, 1100, 1090, 1060], [1050, 900, 950, 940], "known after 8 runs"),
])
def test_the_race_repeats_a_heat_until_known_and_says_how_many_runs_it_took(
        llamacpp: list[int], vllm: list[int], said: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """execute.py's loop on made-up runs (tok/s of each engine's runs in turn)."""
    from loadtest.race import execute
    from loadtest.race.plan import Leg

    tok_s = {"llamacpp-cpu": iter(llamacpp), "vllm-cpu": iter(vllm)}
    rows: list[dict[str, str]] = []

    def run_leg(race: Race, leg: Leg, args: object, first_row: int = 0) -> int:
        for users in leg.users:
            rows.append({"tag": "demo", "users": str(users), "engine": leg.engine,
                         "requests": str(race.counts[users]), "failed": "0", "verdict": "ok",
                         "output_tok_per_s": str(next(tok_s[leg.engine]))})
            if not leg.repeat:
                race.record(leg.engine, users, [])
        return 0

    monkeypatch.setattr(execute, "race_rows", lambda out: rows)
    monkeypatch.setattr(execute, "_run_leg", run_leg)
    race = Race(["llamacpp-cpu", "vllm-cpu"], [8], {8: 96})
    args = parse_args(["--out", str(tmp_path), "--engines", "llamacpp-cpu,vllm-cpu",
                       "--until-known", "--max-repeats", "4", "8"])
    for leg in race.legs():
        run_leg(race, leg, args)
    assert execute._until_known(race, args, 0, started=0) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("until known, 8 users: llamacpp-cpu leads vllm-cpu by "), line
    runs = f"runs {len(llamacpp)}/{len(vllm)} of llamacpp-cpu, vllm-cpu"
    assert said in line and runs in line, line


def test_a_given_count_that_ran_too_short_is_raised_and_the_race_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """Issue 37: `rig race ... 8,32 64` kept vLLM's 4 s run at 32 users (REQUESTS given turned the
    catch-up off), so the heat had one ranked engine. Now the run is raised as a chosen count's
    would be, and the console says why. execute.py's legs on made-up runs (no engine, no Locust)."""
    from loadtest.launch import Launched
    from loadtest.race import execute

    seconds_per_request = {"vllm-cpu": 0.01, "llamacpp-cpu": 0.1}
    rows: list[dict[str, str]] = []

    class Engine:
        def __init__(self, port: int, **_: object) -> None:
            self.url, self.log_path, self.process = f"http://127.0.0.1:{port}", tmp_path, self

        pid = 1

        def start(self) -> None:
            pass

        def stop(self) -> None:
            pass

    def locust(args: object, engine: str, *, users: int, requests: int, warmup: bool = False,
               warmup_log: object = None, repeat: object = None) -> Launched:
        if warmup:
            return Launched(0, "", "", None)
        seconds = requests * seconds_per_request[engine]
        rows.append({"tag": "demo", "users": str(users), "engine": engine,
                     "requests": str(requests), "failed": "0",
                     "completion_time_s": f"{seconds:.3f}",
                     "verdict": "invalid" if seconds < SHORT_S else "valid",
                     "verdict_reasons": "short_run" if seconds < SHORT_S else "",
                     "output_tok_per_s": f"{64 / seconds_per_request[engine]:.1f}"})
        return Launched(0, "", "", rows[-1])

    monkeypatch.setattr(execute, "LocalEngine", Engine)
    monkeypatch.setattr(execute, "_locust", locust)
    monkeypatch.setattr(execute, "race_rows", lambda out: list(rows))
    monkeypatch.setattr(execute, "_report", lambda out, race, rows: 0)
    args = parse_args(["--out", str(tmp_path), "--engines", "vllm-cpu,llamacpp-cpu", "--no-pin",
                       "32", "64"])
    assert execute._race(args, {}) == 0
    assert [(r["engine"], r["requests"], r["verdict"]) for r in rows] == [
        ("vllm-cpu", "64", "invalid"), ("vllm-cpu", "704", "valid"),
        ("llamacpp-cpu", "704", "valid")]
    assert ("vllm-cpu's run at 32 users lasted under 5 s: that heat now has 704 requests, not 64 "
            "(REQUESTS 64 was given, but a run under 5 s cannot be ranked)") in capsys.readouterr().err


def test_until_known_names_no_leader_in_a_heat_with_one_ranked_engine(tmp_path: Path):
    """A heat one engine was ranked in has no winner to know: its line says undecided, not that
    the engine "leads alone"."""
    from loadtest.race.execute import known_lines

    args = parse_args(["--out", str(tmp_path), "--engines", "llamacpp-cpu,vllm-cpu",
                       "--until-known", "8,32"])
    lines = known_lines({8: {"llamacpp-cpu": [1000.0, 1010.0]}, 32: {}}, args)
    assert lines == ["until known, 8 users: undecided — only llamacpp-cpu ranked (2 runs)"]
