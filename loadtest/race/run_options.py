"""The locustfile's own options, as the race passes them through to every run.

The race's command line takes any option of the locustfile (`--workload`, `--input-len`,
`--max-tokens`, `--rate`, ...) besides its own, so a race runs on any workload. Knowing those
options by name lets it refuse a typo before any engine starts, and tell an option's value from
USERS and REQUESTS (`--input-len 512 1,8` is 512 tokens at 1 and 8 users); knowing their checks
lets it refuse, before any engine starts, every value `rig run` would refuse (check_values).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import NoReturn

__all__ = ["RunOptionError", "check_values", "locustfile_options", "split_words"]


class RunOptionError(ValueError):
    """A run option the locustfile does not take, or one without its value: one line."""


def locustfile_options() -> dict[str, bool] | None:
    """{option string: whether it takes a value} for every option the locustfile adds (the
    function loadtest/engines.py registers on Locust's parser, and `rig run` on its own); None
    when they cannot be imported (scripts/demo.sh's check before installing: the race itself
    runs in the rig's venv and checks again)."""
    try:
        from loadtest.launch.options import add_locustfile_options
    except ImportError:
        return None
    parser = argparse.ArgumentParser(add_help=False)
    add_locustfile_options(parser)
    return {option: action.nargs != 0
            for action in parser._actions for option in action.option_strings}


def split_words(words: Sequence[str], known: Mapping[str, bool] | None) -> tuple[list[str],
                                                                                 list[str]]:
    """(positional words, run options) from the words the race's own parser did not take.

    With ``known`` (locustfile_options()), an option not in it is refused and a known option
    that takes a value takes the next word; without it, any option is passed and takes the next
    word unless that starts with `-` (`--option=value` is never ambiguous)."""
    positional: list[str] = []
    passed: list[str] = []
    wants_value = False
    for word in words:
        if word.startswith("-") and len(word) > 1 and not word[1].isdigit():
            name, equals, _ = word.partition("=")
            if known is not None and name not in known:
                raise RunOptionError(f"unknown option {name}: neither the race's nor the "
                                     "locustfile's")
            if known is not None and equals and not known[name]:
                raise RunOptionError(f"{name} takes no value, got {word!r}")
            passed.append(word)
            wants_value = not equals and (known is None or known[name])
        elif wants_value:
            passed.append(word)
            wants_value = False
        else:
            positional.append(word)
    if wants_value and known is not None:
        raise RunOptionError(f"{passed[-1]} needs a value")
    return positional, passed


def check_values(run_options: Sequence[str], engines: Sequence[str], port: int,
                 requests: int) -> None:
    """RunOptionError (one line) for a run option's value that `rig run` would refuse with any
    of `engines` on 127.0.0.1:`port`, `requests` a run, the workload built as the run builds it.
    Without the rig's packages (scripts/demo.sh's check before installing) the workload is not
    built: the race checks again from the rig's venv, before it starts an engine."""
    from loadtest.client.options import ConfigError
    from loadtest.launch.checks import check_run_options, check_workload
    from loadtest.launch.options import add_run_command_options
    from loadtest.workload.spec import WorkloadError

    checking = argparse.ArgumentParser(add_help=False)  # `rig run`'s options, as it parses them
    add_run_command_options(checking)
    checking.error = _refuse  # type: ignore[method-assign]
    built: set[tuple[str, ...]] = set()  # each way of asking, its workload built once
    for engine in engines:
        host = f"http://127.0.0.1:{port}"
        options = checking.parse_args([*run_options, "--engine", engine, "--host", host,
                                       "--requests", str(requests)])
        options.num_users = options.users
        try:
            config = check_run_options(options, host)
            asked = (config.api, config.model, config.target.ignore_eos_as,
                     config.target.regex_as, config.target.lora_as)
            if asked not in built:
                check_workload(options, config)
                built.add(asked)
        except (ConfigError, WorkloadError) as exc:
            raise RunOptionError(str(exc)) from None
        except ModuleNotFoundError:  # numpy, tokenizers: not installed yet
            continue


def _refuse(message: str) -> NoReturn:
    raise RunOptionError(message)
