"""The same checks for every way a run starts: `locust -f loadtest/engines.py`, `rig run`, and
every command that launches a RunSpec.

LOCUST_TYPES gives Locust's own options the one type that checks each; the locustfile sets them
on Locust's parser (check_locust_parser) and `rig run` declares them with them, so both refuse
the same values in the same words. check_run_options makes every check of the rig's own options
that needs no engine, the one the locustfile makes before it asks the engine anything;
check_workload builds the workload as the run will, for the commands that start or render a run
somewhere else (`rig race`, `rig k8s`), so what the run would refuse is refused before anything is
started or rendered. Everything here but check_workload needs only the standard library:
scripts/demo.sh makes these checks with a bare python3 before it installs the rig.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadtest.client.options import CHECKS, RunConfig, config_from_options
from loadtest.client.run_options import run_options
from loadtest.live.progress import progress_interval_s
from loadtest.client.timing import timing_from_options
from loadtest.toolkit.args import refuse_argument
from loadtest.workload import WorkloadError, workload_options
from loadtest.workload.chosen import WorkloadOptions

__all__ = ["LOCUST_TYPES", "check_locust_parser", "check_run_options", "check_workload"]

# Locust's own options that a run takes, each with the one check of its value (CHECKS): `rig
# run`'s parser declares them with it (loadtest/launch/options.py add_locust_options), and the
# locustfile sets it on Locust's parser (check_locust_parser), so `locust -f loadtest/engines.py`
# refuses what `rig run` refuses, in the same words.
LOCUST_TYPES: dict[str, Callable[[object], Any]] = {
    f"--{dest.replace('_', '-')}": CHECKS[dest]
    for dest in ("host", "users", "spawn_rate", "processes")}


def check_locust_parser(locust_parser: Any) -> None:
    """Locust's parser (the locustfile's init_command_line_parser hook) made to check as `rig
    run` does: LOCUST_TYPES on Locust's own options, and any bad argument one `error:` line and
    exit 2 (argparse prints its whole usage first). Locust's --processes -1 (one per core) goes
    with it, as it does in `rig run`: the client's processes are counted, never guessed."""
    for action in locust_parser._actions:
        for option in action.option_strings:
            if option in LOCUST_TYPES:
                action.type = LOCUST_TYPES[option]
    locust_parser.error = lambda message: refuse_argument(message, "rig run")


def check_run_options(options: Any, host: str | None) -> RunConfig:
    """Every check of the run's options that needs no engine (the locustfile makes the same
    ones before it asks the engine anything); ConfigError or WorkloadError, one line."""
    config = config_from_options(options, host)
    run_options(options)  # open loop, --slo, --keep-outputs
    timing_from_options(options)  # --duration, its window, --stages
    workload_options(options)  # the workload's own options
    progress_interval_s(options)  # the console's progress line
    return config


def check_workload(options: Any, config: RunConfig) -> bool:
    """Build the run's workload as the run builds it (its files read, a trace's times and a
    dataset's rows checked): WorkloadError (one line) where the run would refuse it. False where
    the prompts need the tokenizer of a model only the engine names (no --tokenizer, no local
    --model folder): then only a trace's files are checked, and the run builds the rest once it
    has asked the engine."""
    from loadtest.workload.build import build_workload, check_source_files  # numpy, tokenizers
    source = workload_options(options)
    if source.needs_tokenizer and not source.tokenizer and not _has_tokenizer(source, config):
        check_source_files(source, config.requests)
        return False
    build_workload(config.prompts, config.requests, api=config.api, model=config.model or "model",
                   max_tokens=config.max_tokens, ignore_eos=config.ignore_eos,
                   temperature=config.temperature, ignore_eos_as=config.target.ignore_eos_as,
                   source=source, model_dir=config.model, regex_as=config.target.regex_as,
                   lora_as=config.target.lora_as)
    return True


def _has_tokenizer(source: WorkloadOptions, config: RunConfig) -> bool:
    from loadtest.workload.tokens import find_tokenizer
    try:
        find_tokenizer(source.tokenizer, config.model)
    except WorkloadError:
        return False
    return True
