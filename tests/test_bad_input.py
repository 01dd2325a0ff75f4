"""Bad input: one clear line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadtest.client.arrivals import ARRIVALS
from loadtest.client.options import CHECKS
from loadtest.launch.checks import LOCUST_TYPES
from loadtest.launch.options import _declared, add_locustfile_options
from rig_helpers import free_port, locustfile_checks, run_locust
from test_cli import (BY_NAME, FACTORIES, PARSED, STRATEGIES,  # rig's in-process check, bad values
                      check, required_positionals)


def _refused(result, message: str) -> None:
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]


def test_unknown_engine():
    _refused(run_locust("--engine", "nope"), "unknown engine 'nope'")


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_requests_must_be_positive(value: str):
    """In-process (tests/rig_helpers.py's locustfile_checks); test_bad_max_tokens is the same
    check through the real process."""
    _refused(locustfile_checks("--requests", value), "--requests must be a positive integer")


def test_bad_max_tokens():
    _refused(run_locust("--max-tokens", "0"), "--max-tokens must be a positive integer")


def test_unreachable_host():
    url = f"http://127.0.0.1:{free_port()}"
    _refused(run_locust("--host", url), f"cannot reach {url}/v1/models")


def test_missing_prompt_file(engine_url: str):
    _refused(run_locust("--host", engine_url, "--prompts", "/nonexistent/p.jsonl"),
             "no prompt file '/nonexistent/p.jsonl'")


def test_malformed_prompt_file(engine_url: str, tmp_path: Path):
    prompts = tmp_path / "bad.jsonl"
    prompts.write_text('{"prompt": "fine"}\n{"prompt": \n')
    _refused(run_locust("--host", engine_url, "--prompts", str(prompts)),
             f"{prompts}:2: not valid JSON")


def test_prompt_without_text(engine_url: str, tmp_path: Path):
    prompts = tmp_path / "bad.jsonl"
    prompts.write_text('{"id": "x"}\n')
    _refused(run_locust("--host", engine_url, "--prompts", str(prompts)),
             'each line needs a non-empty string "prompt"')


@pytest.mark.parametrize("content, message", [
    ("", "no prompts in file"),
    ("\n  \n", "no prompts in file"),
    ('{"prompt": 42}\n', 'each line needs a non-empty string "prompt"'),
    ('{"prompt": "hi", "max_tokens": "8"}\n', '"max_tokens" must be a positive integer'),
    ('{"prompt": "hi", "max_tokens": 0}\n', '"max_tokens" must be a positive integer'),
    ('["hi"]\n', 'each line needs a non-empty string "prompt"'),
])
def test_empty_or_wrongly_typed_prompt_file(engine_url: str, tmp_path: Path, content: str,
                                            message: str):
    prompts = tmp_path / "bad.jsonl"
    prompts.write_text(content)
    _refused(run_locust("--host", engine_url, "--prompts", str(prompts)), message)


def test_prompt_file_that_is_a_folder(engine_url: str, tmp_path: Path):
    folder = tmp_path / "prompts.jsonl"
    folder.mkdir()
    _refused(run_locust("--host", engine_url, "--prompts", str(folder)),
             f"no prompt file '{folder}'")


def test_tgi_with_ignore_eos_is_refused():
    _refused(run_locust("--engine", "tgi", "--ignore-eos"), "tgi's /generate_stream has no ignore_eos")


def test_api_the_engine_does_not_speak():
    _refused(run_locust("--engine", "vllm", "--api", "generate"), "engine vllm speaks --api")


def test_no_users():
    _refused(run_locust("--users", "0", timeout_s=60), "--users must be a positive integer, got '0'")


def test_out_folder_that_cannot_be_created(tmp_path: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = blocker / "results"
    _refused(run_locust("--out", str(out)), f"--out '{out}': cannot create it")


def test_prompt_file_that_is_not_utf8(engine_url: str, tmp_path: Path):
    prompts = tmp_path / "latin1.jsonl"
    prompts.write_bytes('{"prompt": "caf\u00e9"}\n'.encode("latin-1"))
    _refused(run_locust("--host", engine_url, "--prompts", str(prompts)),
             f"{prompts}: not UTF-8 text")


def test_a_model_the_engine_does_not_serve(engine_url: str):
    _refused(run_locust("--host", engine_url, "--model", "no-such-model"),
             "--model 'no-such-model' is not served here; the engine serves: tiny-llama")


def test_max_tokens_beyond_the_engines_context(engine_url: str):
    _refused(run_locust("--host", engine_url, "--max-tokens", "100000"),
             "--max-tokens 100000 leaves no room for a prompt: the engine takes at most 2048")


def test_a_prompt_longer_than_the_engines_context(engine_url: str, tmp_path: Path):
    """Counted by the engine's own tokenizer before the run (vLLM's /tokenize), not found out by
    every request failing: with 64 output tokens, a 2,100-word prompt overflows 2,048 tokens."""
    prompts = tmp_path / "long.jsonl"
    prompts.write_text('{"id": "short", "prompt": "Hello"}\n'
                       '{"id": "long", "prompt": "' + "word " * 2100 + '"}\n')
    _refused(run_locust("--host", engine_url, "--prompts", str(prompts), "--max-tokens", "64"),
             "prompt 'long' is ")
    fits = tmp_path / "fits.jsonl"
    fits.write_text('{"id": "short", "prompt": "Hello"}\n')
    result = run_locust("--host", engine_url, "--prompts", str(fits), "--max-tokens", "4",
                        "--requests", "2", "--users", "1", "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_huge_prompt_line(engine_url: str, tmp_path: Path):
    """Refused while the file is read, before any body is built (each request holds its own)."""
    prompts = tmp_path / "huge.jsonl"
    prompts.write_text('{"prompt": "ok"}\n{"prompt": "' + "x" * (5 << 20) + '"}\n')
    _refused(run_locust("--host", engine_url, "--prompts", str(prompts)),
             f"{prompts}:2: a line of 5 MiB; a prompt may be at most 4 MiB")


def _numeric_options() -> list[str]:
    """The locustfile's options that take a number (their default is one), found in the same
    function that registers them on Locust's parser."""
    parser = argparse.ArgumentParser(add_help=False)
    add_locustfile_options(parser)
    numeric = []
    for action in parser._actions:
        try:
            float(str(action.default))
        except ValueError:
            continue
        if action.nargs != 0 and action.option_strings:
            numeric.append(action.option_strings[-1])
    return numeric


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(option=st.sampled_from(_numeric_options()),
       value=st.one_of(st.sampled_from(["nan", "inf", "-inf", "1e999", "", "²", "0x10"]),
                       st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Nd")),
                               min_size=1, max_size=8)))
def test_a_malformed_number_is_one_line_from_locust_itself(option: str, value: str):
    """Through the locustfile's checks (in-process: tests/rig_helpers.py's locustfile_checks;
    test_bad_max_tokens and test_no_users go through the real process): a number option given a
    word, NaN, infinity or an empty value ends in one `error:` line and exit 2, before anything
    is sent, the line `rig run` prints for it. Every option of every command is walked
    in-process in tests/test_cli.py."""
    host = f"http://127.0.0.1:{free_port()}"
    result = locustfile_checks(f"{option}={value}", "--host", host)
    code, _, err = check(BY_NAME["run"], [f"{option}={value}", "--host", host])
    assert result.returncode == code, (result.stderr, err)
    if code == 0:  # a value both take (an empty one keeps the default): on to the engine
        return
    assert code == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr[-2000:]
    assert _same_words(errors[0]) == _same_words(err.strip())


def _rig_run_error(*argv: str) -> str:
    """The one line `rig run ARGV` refuses with (checked in-process: nothing starts)."""
    code, _, err = check(BY_NAME["run"], list(argv))
    assert code == 2 and len(err.splitlines()) == 1, err
    return err.strip()


def _same_words(line: str) -> str:
    return line.removesuffix(" (see rig run --help)")


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_locusts_own_options_are_checked_as_rig_run_checks_them(data: st.DataObject):
    """Issue 37: `locust -f loadtest/engines.py --host http://host:port` ended in a traceback
    where `rig run` printed one line. Locust's own options that a run takes (--host, --users,
    --spawn-rate, --processes) get the type `rig run` declares them with (LOCUST_TYPES), fed the
    malformed values tests/test_cli.py feeds `rig run`: one `error:` line, the same as rig run's,
    exit 2, before anything is sent. In-process (tests/rig_helpers.py's locustfile_checks);
    test_no_users is one of them through the real process."""
    option = data.draw(st.sampled_from(sorted(LOCUST_TYPES)), label="option")
    value = data.draw(STRATEGIES[LOCUST_TYPES[option]](Path("/nonexistent")), label="value")
    result = locustfile_checks(f"{option}={value}")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and option in errors[0], result.stderr[-2000:]
    assert errors[0] == _rig_run_error(f"{option}={value}")


@pytest.mark.parametrize("host, locust", [
    ("http://user:s3cret-pw@127.0.0.1:{port}", run_locust),
    ("https://:s3cret-pw@127.0.0.1:{port}/v1", locustfile_checks)], ids=["process", "in-process"])
def test_a_host_with_a_password_is_refused_and_the_password_never_shown(host: str, locust):
    """Issue 37: `--host http://user:pw@127.0.0.1:P` failed as `cannot reach ...: Name or
    service not known`. The rig sends no HTTP basic auth: refused in one line that says so and
    points to the API key, by `locust -f` and `rig run` alike, the password never printed."""
    host = host.format(port=free_port())
    result = locust("--host", host)
    _refused(result, "--host must not carry a user name or password")
    assert "LLM_API_KEY" in result.stderr and "s3cret-pw" not in result.stderr + result.stdout
    assert "s3cret-pw" not in _rig_run_error("--host", host)


# --- one check, whichever way a run starts ------------------------------------------------------

def _bad(dest: str) -> st.SearchStrategy[str]:
    """Malformed values for the option `dest`, by its one check (CHECKS)."""
    check = CHECKS[dest]
    if check in STRATEGIES:
        return STRATEGIES[check](Path("/nonexistent"))
    factory = getattr(check, "__qualname__", "").partition(".<locals>")[0]
    if factory in FACTORIES:
        return FACTORIES[factory](Path("/nonexistent"))
    words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
                    max_size=10).filter(lambda t: "\x00" not in t)
    return {"slo": st.one_of(st.sampled_from(["fast", "ttft_ms=0", "ttft_ms=-1", "ttft=500",
                                              "ttft_ms=500,ttft_ms=9", "itl_p100_ms=5"]),
                             words.filter(lambda t: "=" not in t and t.strip())),
            "arrival": words.filter(lambda t: t not in ARRIVALS),
            "burstiness": st.one_of(st.sampled_from(["0", "-1", "nan", "inf", "-inf"]),
                                    words.filter(lambda t: not _a_number(t))),
            }[dest]


def _a_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# What an option needs beside it to reach its own check (an open loop's shape needs --rate, a
# gamma's --burstiness needs --arrival gamma), on the locustfile's and `rig run`'s command line.
_BESIDE = {"arrival": ["--rate", "1"], "arrival_seed": ["--rate", "1"],
           "burstiness": ["--rate", "1", "--arrival", "gamma"]}
# A sweep matrix's place for it: a workload key, or an engine entry's.
_MATRIX = {"requests": "workload", "max_tokens": "workload", "temperature": "workload",
           "slo": "workload", "host": "engine"}


def _matrix_refusal(dest: str, value: str) -> str:
    from loadtest.sweep.matrix import MatrixError, parse_matrix

    engine: dict[str, object] = {"engine": "vllm-cpu", "launch": "local"}
    workload: dict[str, object] = {}
    if _MATRIX[dest] == "engine":
        engine = {"engine": "vllm-cpu", dest: value}
    else:
        workload[dest] = value
    with pytest.raises(MatrixError) as refused:
        parse_matrix({"name": "t", "users": [1], "workload": workload, "engines": [engine]}, None)
    assert len(str(refused.value).splitlines()) == 1
    return str(refused.value)


def _takers(dest: str) -> list:
    """Every command besides `rig run` that takes the option from the registrar."""
    return [c for c in PARSED if c.name != "run" and any(
        a.dest == dest and getattr(a, "show_default", False) for a in c.build_parser()._actions)]


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_a_bad_value_is_refused_alike_however_the_run_starts(data: st.DataObject):
    """Issue 37: each option value goes through the one check of it (CHECKS) whichever way the
    run was started: `locust -f loadtest/engines.py` (its parser and the locustfile's first
    checks, in-process: tests/rig_helpers.py's locustfile_checks; one case through the real
    process below), `rig run`, every command that takes the option (the sweeps, the latency
    preset, peers, bench, ...) and a sweep matrix's YAML. Each refuses it in one `error:` line,
    exit 2, in the words of the check."""
    dest = data.draw(st.sampled_from(sorted(CHECKS)), label="option")
    value = data.draw(_bad(dest), label="value")
    try:
        CHECKS[dest](value)
    except ValueError as exc:  # BadValue
        words = str(exc)
    else:
        return  # a value its check takes (a generator's near miss): nothing to refuse
    if value == "" and _declared()[dest].default == "":
        return  # "" is "not given" there (--max-spend-requests: no cap)
    flag = f"--{dest.replace('_', '-')}"
    argv = [*_BESIDE.get(dest, []), f"{flag}={value}"]
    host = [] if dest == "host" else ["--host", f"http://127.0.0.1:{free_port()}"]

    result = locustfile_checks(*argv, *host)
    _refused(result, words)
    code, _, err = check(BY_NAME["run"], [*argv, *host])
    assert code == 2 and words in err and len(err.splitlines()) == 1, err
    for command in _takers(dest):
        code, _, err = check(command, [*required_positionals(command), f"{flag}={value}"])
        assert code == 2 and words in err and len(err.splitlines()) == 1, (command.name, err)
    if dest in _MATRIX:
        assert words in _matrix_refusal(dest, value)


def test_the_commands_that_take_a_run_option_are_walked():
    """The generated test above reaches each command where an option enters: the sweeps, the
    latency preset and the benches take theirs from the registrar."""
    takers = {dest: {c.name for c in _takers(dest)} for dest in ("requests", "users", "host",
                                                                  "arrival_seed", "slo")}
    assert {"sweep threads", "sweep rates", "sweep slo", "latency", "overhead", "inprocess",
            "peers run", "bench"} <= takers["requests"]
    assert {"sweep rates", "sweep slo", "peers run"} <= takers["users"]
    assert {"sweep threads", "sweep rates", "peers run"} <= takers["host"]
    assert {"sweep rates", "sweep slo"} <= takers["arrival_seed"]
    assert {"sweep threads", "sweep rates"} <= takers["slo"]


@pytest.mark.parametrize("argv, words", [
    (["--arrival-seed=-1", "--rate", "1"], "--arrival-seed must be a whole number of 0 or more"),
    (["--temperature=-0.5"], "--temperature must be at least 0, got '-0.5'")])
def test_a_bad_value_through_the_real_locustfile(argv: list[str], words: str):
    """The wiring of the test above, once each through `locust -f loadtest/engines.py`: the
    seed a sweep refused and the locustfile took (issue 37), a matrix's temperature."""
    _refused(run_locust(*argv, "--host", f"http://127.0.0.1:{free_port()}", timeout_s=60), words)


@pytest.mark.parametrize("value", [" ", ": "])
def test_a_blank_or_padded_burstiness_is_refused_by_the_locustfile_as_given(value: str):
    """Found by the generated test above: the locustfile stripped --burstiness before its check,
    so " " read as not given (the run went on) and ": " was quoted as ':'."""
    result = locustfile_checks("--rate", "1", "--arrival", "gamma", f"--burstiness={value}",
                               "--host", f"http://127.0.0.1:{free_port()}")
    _refused(result, f"--burstiness must be a number above 0, got {value!r}")
