"""The rig's command-line options (added to Locust's own) and their validation.

Bad input is refused with one line (ConfigError) before anything is sent.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.client.arrivals import arrival_kind, burstiness
from loadtest.toolkit.types import BadValue, at_least, positive_int, positive_number, seed
from loadtest.toolkit.types import url as checked_url
from loadtest.results.goodput import slo_text
from loadtest.results.redact import redact
from loadtest.client.targets import TARGETS, Target

__all__ = ["CHECKS", "ConfigError", "RunConfig", "add_options", "checked", "config_from_options",
           "engine_urls_of", "ensure_writable", "users_of"]


HOSTED_REQUEST_CAP = 100  # a hosted engine's default --max-spend-requests

# The one check of each of these options' values, by dest, wherever a value enters: a command's
# parser (as the option's type: loadtest/launch/options.py add_run_options), the locustfile
# (config_from_options, which sees the web UI form's values too), a sweep matrix's workload.
# The locustfile declares its own as text: Locust's web UI hands a form's values over in the type
# of the default, and the check here turns them into numbers. Locust's own options (--host,
# --users, ...) are in it as well; loadtest/launch/checks.py sets them on Locust's parser.
CHECKS: dict[str, Callable[[object], Any]] = {
    "host": checked_url, "users": positive_int, "spawn_rate": positive_number,
    "processes": positive_int, "requests": positive_int, "max_tokens": positive_int,
    "temperature": at_least(0.0), "read_timeout": at_least(0.001), "repeat": positive_int,
    "telemetry_interval": at_least(0.0), "max_spend_requests": positive_int, "slo": slo_text,
    "arrival": arrival_kind, "arrival_seed": seed, "burstiness": burstiness}


class ConfigError(ValueError):
    """A bad option; the message is one line for the user."""


def add_options(parser: Any) -> None:
    group = parser.add_argument_group("llm-load-rig")
    group.add_argument("--engine", default="vllm-cpu",
                       help=f"engine slug: {', '.join(TARGETS)} (default vllm-cpu)")
    group.add_argument("--requests", type=str, default="256",
                       help="fixed workload size: exactly this many requests in total")
    group.add_argument("--prompts", default="mixed",
                       help="prompt set: a shipped name (mixed, story) or a .jsonl file")
    group.add_argument("--max-tokens", type=str, default="128", help="output tokens per request")
    group.add_argument("--ignore-eos", action="store_true", default=False,
                       help="ask the engine for exactly --max-tokens (vLLM-family engines; "
                            "transformers: a per-request generation_config without EOS)")
    group.add_argument("--api", default="", help="completions | chat | generate (engine default)")
    group.add_argument("--model", default="", help="model name to request (default: ask the engine)")
    group.add_argument("--temperature", type=str, default="0", help="sampling temperature")
    group.add_argument("--out", default="results", help="results folder (default results/)")
    group.add_argument("--flags", default=None,
                       help="engine flags to record with the run, as given (default: those of "
                            "an engine the rig started at --host on this host, else none)")
    group.add_argument("--gpu", default="", help="GPU(s) the engine runs on, to record")
    group.add_argument("--read-timeout", type=str, default="600",
                       help="seconds a stream may stay silent before the request fails")
    group.add_argument("--repeat", type=str, default="1", help="repeat number, recorded (sweeps)")
    group.add_argument("--tag", default="", help="free label recorded with the run (sweeps)")
    group.add_argument("--engine-urls", default="",
                       help="the engine's own base URLs behind a balancer at --host (its "
                            "replicas), comma-separated: their /metrics and token counters are "
                            "read and summed, each prefix cache emptied (default: --host's)")
    group.add_argument("--telemetry-interval", type=str, default="2",
                       help="seconds between GPU and engine-metrics samples during the run (0 = "
                            "off); each engine scrape costs the engine CPU, so not too often")
    group.add_argument("--recount", action="store_true", default=False,
                       help="ask the engine for each chunk's token ids and check its output token "
                            "counts and text against the model's tokenizer (vLLM-family engines)")
    group.add_argument("--warmup", action="store_true", default=False,
                       help="a warm-up run: measured and saved in its folder, never added to runs.csv")
    group.add_argument("--max-spend-requests", type=str, default="",
                       help="refuse a run of more requests than this (hosted engines, which bill "
                            f"per request: default {HOSTED_REQUEST_CAP}; others: no cap)")


@dataclass(frozen=True)
class RunConfig:
    engine: str
    target: Target
    url: str
    api: str
    requests: int
    prompts: str
    max_tokens: int
    ignore_eos: bool
    model: str
    temperature: float
    out: Path
    flags: str | None  # None: not told (--flags), so read from an engine the rig started
    gpu: str
    read_timeout_s: float
    repeat: int
    tag: str
    warmup: bool
    telemetry_interval_s: float
    api_key: str | None
    recount: bool = False
    engine_urls: tuple[str, ...] = ()  # the engine's own endpoints (replicas); () : url's

    @property
    def engine_endpoints(self) -> tuple[str, ...]:
        """Where the engine itself answers: its replicas behind a balancer, else `url`."""
        return self.engine_urls or (self.url,)

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers


def config_from_options(options: Any, host: str | None) -> RunConfig:
    engine = options.engine
    if engine not in TARGETS:
        raise ConfigError(f"unknown engine {engine!r}; choose one of: {', '.join(TARGETS)}")
    target = TARGETS[engine]
    api = options.api or _default_api(options, target)
    if api not in target.apis:
        raise ConfigError(f"engine {engine} speaks --api {' or '.join(target.apis)}, not {api!r}")
    # the check `rig run`'s --host has (a value from the web UI's form comes here too)
    url = checked("host", host or _base_url(engine, target))
    url = url.removesuffix("/v1")  # the base URL: the API paths are added per request
    if engine == "openai" and not options.model:
        raise ConfigError("--engine openai needs --model (an endpoint serves many)")
    api_key = os.environ.get(target.api_key_env) or None
    if target.hosted and not api_key:
        raise ConfigError(f"--engine {engine} needs its key in the environment: set {target.api_key_env}")
    requests = checked("requests", options.requests)
    _check_spend(engine, target, requests, getattr(options, "max_spend_requests", ""))
    if engine == "tgi" and api == "generate" and options.ignore_eos:
        raise ConfigError("tgi's /generate_stream has no ignore_eos; use --api chat or drop --ignore-eos")
    if getattr(options, "num_users", None) is not None:  # None: Locust's own default, later
        checked("users", options.num_users)
    return RunConfig(
        engine=engine, target=target, url=url, api=api,
        requests=requests,
        prompts=options.prompts,
        max_tokens=checked("max_tokens", options.max_tokens),
        ignore_eos=bool(options.ignore_eos), model=options.model,
        temperature=checked("temperature", options.temperature),
        out=Path(options.out), flags=None if options.flags is None else redact(options.flags),
        gpu=options.gpu,
        read_timeout_s=checked("read_timeout", options.read_timeout),
        repeat=checked("repeat", options.repeat),
        tag=redact(options.tag),  # a label may hold a secret (token=sk-...), as flags may
        warmup=bool(options.warmup),
        telemetry_interval_s=checked("telemetry_interval", options.telemetry_interval),
        api_key=api_key,
        recount=bool(getattr(options, "recount", False)),
        engine_urls=engine_urls_of(getattr(options, "engine_urls", "")),
    )


def engine_urls_of(text: str) -> tuple[str, ...]:
    """--engine-urls: comma-separated base URLs, each checked as --host is."""
    urls = []
    for part in (p.strip() for p in str(text or "").split(",")):
        if not part:
            continue
        try:
            urls.append(checked_url(part).removesuffix("/v1"))
        except BadValue as exc:
            raise ConfigError(f"--engine-urls {exc}") from None
    if str(text or "").strip() and not urls:
        raise ConfigError(f"--engine-urls must list base URLs, got {text!r}")
    return tuple(urls)


def _default_api(options: Any, target: Target) -> str:
    """The engine's own API, or chat for a conversation (its turns are message lists)."""
    conversational = (getattr(options, "workload", "") == "conversation"
                      or getattr(options, "dataset_mode", "") == "conversation")
    return "chat" if conversational and "chat" in target.apis else target.api


def _base_url(engine: str, target: Target) -> str:
    """A hosted engine's base URL from its environment variable (or its public default); a
    local engine's default port on this host."""
    if not target.hosted:
        return f"http://127.0.0.1:{target.port}"
    url = os.environ.get(target.base_url_env) or target.default_base_url
    if not url:
        raise ConfigError(f"--engine {engine} needs its base URL: set {target.base_url_env} "
                          "or pass --host")
    return url


def _check_spend(engine: str, target: Target, requests: int, cap_option: str) -> None:
    """Refuse, before anything is sent, a run of more requests than the spend cap. The
    dispatcher sends each of the workload's requests once (a 429 is retried, and a connection
    closed before any answer is reopened once; neither is an answered, billed request)."""
    if not cap_option and not target.hosted:
        return
    cap = checked("max_spend_requests", cap_option) if cap_option else HOSTED_REQUEST_CAP
    if requests > cap:
        raise ConfigError(f"--requests {requests} is over --max-spend-requests {cap} for {engine}"
                          f"{' (a hosted, billed endpoint)' if target.hosted else ''}; "
                          "raise --max-spend-requests if you mean to send them")


def users_of(options: Any) -> int:
    """The run's users, read where it needs them: Locust's --users, checked where it entered
    (its parser, the web UI's form); None until a headless run starts, which then takes 1."""
    return options.num_users if options.num_users is not None else 1


def ensure_writable(folder: Path, name: str = "--out") -> None:
    """Create `folder` if need be; ConfigError when it cannot be made or written. For the
    process that writes results only: a worker on another host has no use for it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{name} {str(folder)!r}: cannot create it ({exc.strerror})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{name} {str(folder)!r}: not writable")


def checked(dest: str, value: Any) -> Any:
    """`value` through the one check of the option `dest` (CHECKS); ConfigError naming the
    option (`--max-tokens must be a positive integer, got '0'`) when it fails."""
    try:
        return CHECKS[dest](value)
    except BadValue as exc:
        flag = f"--{dest.replace('_', '-')}"
        raise ConfigError(str(exc) if str(exc).startswith(flag) else f"{flag} {exc}") from None
