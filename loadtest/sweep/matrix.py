"""A sweep matrix: engines x flag values x GPU sets x user counts x repeats, checked whole.

    name: vllm-cpu-max-num-seqs          # tag in runs.csv, folder OUT/sweeps/NAME/
    workload: {prompts: mixed, requests: 64, max_tokens: 32, ignore_eos: true}
                                         # + a workload source and its options (loadtest/workload/
                                         #   options.py, by attribute name): source: synthetic,
                                         #   input_len: 2048, output_len: 32, prefix_groups: 8, ...
    workloads:                           # optional: several workloads, each cell run on each:
      decode: {source: synthetic, input_len: 128, output_len: 256}   # NAME: options over `workload`
                                         # + requests_per_user: N (at U users, max(requests, N x U))
                                         # + slo: "ttft_ms=500,itl_ms=50" (goodput columns, --slo)
    users: [8, 32]
    repeats: 2
    warmup_requests: 16                  # optional (default: 2 x the largest user count, >= 16; 0 = none)
    health_timeout_s: 900                # optional
    run_timeout_s: 1800                  # optional: one Locust run
    interleave_repeats: true             # optional: repeat 1 of every configuration, then repeat 2, ...
                                         #   (each engine started once per repeat; drift hits all alike)
                                         #   together: every configuration started once, at once,
                                         #   each on GPUs of its own (launch: local), and measured
                                         #   cell by cell in turn with no restart between repeats
    client_processes: 4                  # optional (default 1): the client's Locust processes; a
                                         #   local engine keeps off as many cores
    engines:
      - engine: vllm-cpu                 # a servers/ slug
        launch: local                    # local (embedded vLLM CPU process) | compose (default)
        # host: http://127.0.0.1:8080    # instead: an engine already running (not started/stopped;
        #                                #   only `flags` and `gpus` to record beside it)
        settings: {MAX_TOTAL_TOKENS: 512}          # fixed for every configuration of this entry
        sweep: {MAX_CONCURRENT_REQUESTS: [2, 32]}  # one configuration per combination; null = not set
        gpus: ["0", "0,1"]               # GPU engines: one configuration per GPU set (default ["0"])
        replicas: per-gpu                # one replica per GPU of the set behind nginx (CPU: N); compose,
                                         #   or local: local processes behind a local nginx, where
                                         #   a GPU engine may also take N (each sees the whole set)
        network: host                    # compose: host networking (a dockerd with --bridge=none)

Settings are the bare names of servers/settings.py (MAX_CONCURRENT_REQUESTS, SPECULATE, ...);
the sweep owns PORT and HOST, and GPUS comes from `gpus`. load_matrix() refuses a bad matrix
with one line (MatrixError) before anything starts.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields, replace
from types import SimpleNamespace
from pathlib import Path
from typing import Any

import yaml

from loadtest.toolkit.types import BadValue
from loadtest.client.options import CHECKS
from loadtest.client.targets import TARGETS
from loadtest.cpus import complete_layout
from loadtest.launch.options import run_defaults
from loadtest.workload import WorkloadError, WorkloadOptions, build_workload, workload_options
from loadtest.workload.build import workload_sha256
from loadtest.workload.options import OPTION_FLAGS
from loadtest.results.goodput import parse_slo
from servers.local import LOCAL
from servers.registry import ENGINES, validate
from servers.settings import SettingError

__all__ = [
    "EngineConfig",
    "Matrix",
    "MatrixError",
    "SweepWorkload",
    "check_gpus",
    "default_warmup_requests",
    "load_matrix",
    "parse_matrix",
]

_TOP_KEYS = {"name", "workload", "workloads", "users", "repeats", "warmup_requests", "health_timeout_s",
             "run_timeout_s", "interleave_repeats", "client_processes", "engines"}
_ENGINE_KEYS = {"engine", "launch", "settings", "sweep", "gpus", "replicas", "network"}
_RUNNING_KEYS = {"engine", "host", "flags", "gpus"}
# The run options a `workload:` takes (the locustfile's, by dest), and the sweep's own.
_RUN_KEYS = ("prompts", "requests", "max_tokens", "ignore_eos", "api", "temperature", "slo")
_WORKLOAD_KEYS = {*_RUN_KEYS, "requests_per_user"}
_DEFAULTS = run_defaults(*_RUN_KEYS)  # the locustfile's own defaults, parsed
# The workload source's own options, by attribute name ("source" is --workload).
_SOURCE_KEYS = {"source", *(name for name in OPTION_FLAGS if name != "workload")}
_SWEEP_OWNED = {"PORT": "the sweep picks a free port", "HOST": "set `network: host` instead",
                "GPUS": "list GPU sets under `gpus:`"}
_LOCAL_REFUSED = {"MODEL", "SERVED_MODEL_NAME", "IMAGE"}


class MatrixError(ValueError):
    """A matrix the sweep refuses; the message is one line for the user."""


@dataclass(frozen=True)
class SweepWorkload:
    """What a sweep's cells run: the run options of a matrix's `workload:` (the locustfile's
    options by dest, their defaults the locustfile's own: tests/test_layers.py holds them to
    it), how the requests grow with the users, and the workload source, parsed once here into
    the workload's own type (loadtest/workload/options.py's WorkloadOptions)."""

    prompts: str = _DEFAULTS["prompts"]
    requests: int = _DEFAULTS["requests"]
    max_tokens: int = _DEFAULTS["max_tokens"]
    ignore_eos: bool = _DEFAULTS["ignore_eos"]
    api: str = _DEFAULTS["api"]
    temperature: float = _DEFAULTS["temperature"]
    requests_per_user: int = 0  # at U users, max(requests, requests_per_user x U) requests
    slo: str = _DEFAULTS["slo"]  # latency targets for goodput (results/goodput.py), canonical text
    # The workload source and its options as given, (dest, text) pairs, sorted: --workload and
    # the rest of loadtest/workload/options.py, handed to each cell's run as they were written
    # (and part of its cell id); empty for a prompt set.
    source: tuple[tuple[str, str], ...] = ()
    label: str = ""  # its name under `workloads:` (cells' folders); "" for the one `workload:`
    # `source` parsed (None for a prompt set): what the sweep itself builds and hashes.
    options: WorkloadOptions | None = field(default=None, compare=False, repr=False)

    def identity(self) -> dict[str, Any]:
        """What of the workload a cell's id is made of: every field but `options` (`source`
        says it), and the newer ones only where set, so ids of matrices written before them
        stay."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "options"}
        return {k: v for k, v in values.items()
                if v or k not in ("requests_per_user", "slo", "source", "label")}

    def requests_at(self, users: int) -> int:
        """The fixed workload's size at ``users`` users."""
        return max(self.requests, self.requests_per_user * users)

    def describe(self) -> str:
        per_user = f", or {self.requests_per_user} per user if more" if self.requests_per_user else ""
        what = " ".join(f"{k}={v}" for k, v in self.source) if self.source else self.prompts
        outputs = "" if dict(self.source).get("output_len") else f", max {self.max_tokens} tokens"
        return f"{what} x {self.requests} requests{per_user}{outputs}"


@dataclass(frozen=True)
class EngineConfig:
    """One engine configuration: started once, measured at every user count and repeat."""

    engine: str
    launch: str  # local | compose | running
    settings: dict[str, str]  # without PORT/HOST/GPUS
    gpus: str = ""  # "0" or "0,1"; "" on CPU
    replicas: str = ""  # "" | "per-gpu" | "N"
    network: str = ""  # "" | "host"
    swept: tuple[str, ...] = ()  # the settings that vary, for the folder name
    host: str = ""  # launch == running: the engine's URL
    flags_text: str = ""  # launch == running: the user's --flags, recorded as given


@dataclass(frozen=True)
class Matrix:
    name: str
    workload: SweepWorkload
    users: tuple[int, ...]
    repeats: int
    configs: tuple[EngineConfig, ...]
    warmup_requests: int
    health_timeout_s: float = 900
    run_timeout_s: float = 1800
    interleave_repeats: bool = False
    # interleave_repeats: together: every configuration started at once (each on its own GPUs)
    # and kept up while the others are measured, so repeats interleave without restarts.
    start_together: bool = False
    source: dict[str, Any] = field(default_factory=dict)
    workloads: tuple[SweepWorkload, ...] = ()  # `workloads:`; empty: the one `workload`
    # The client's Locust processes (its cores): one process streams ~25,000 tok/s on a GPU
    # host's core, less than four GPUs serve; the engines keep off as many cores.
    client_processes: int = 1

    @property
    def all_workloads(self) -> tuple[SweepWorkload, ...]:
        return self.workloads or (self.workload,)


def load_matrix(path: Path, gpu_count: int | None) -> Matrix:
    """Read and check a YAML matrix; ``gpu_count`` None skips the GPU presence check (dry run)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MatrixError(f"cannot read matrix {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise MatrixError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise MatrixError(f"{path}: a matrix is a YAML mapping with name, workload, users, engines")
    return parse_matrix(data, gpu_count, where=str(path))


def parse_matrix(data: dict[str, Any], gpu_count: int | None, where: str = "matrix") -> Matrix:
    _no_unknown(data, _TOP_KEYS, where)
    name = _name(data.get("name"), where)
    workload = _workload(data.get("workload") or {}, where)
    workloads = _workloads(data.get("workloads"), data.get("workload") or {}, where)
    users = _int_list(data.get("users"), f"{where}: users")
    repeats = _positive(data.get("repeats", 1), f"{where}: repeats")
    entries = data.get("engines")
    if not isinstance(entries, list) or not entries:
        raise MatrixError(f"{where}: engines must be a non-empty list of {{engine: SLUG, ...}}")
    configs: list[EngineConfig] = []
    for index, entry in enumerate(entries, 1):
        configs += _expand(entry, f"{where}: engines[{index}]" if len(entries) > 1 else where)
    _no_duplicates(configs, where)
    for config in configs:
        _check_config(config, gpu_count, where)
        for each in workloads or (workload,):
            _check_workload(each, config.engine, where)
    warmup = data.get("warmup_requests", default_warmup_requests(users))
    warmup = 0 if warmup == 0 else _positive(warmup, f"{where}: warmup_requests")
    interleave = data.get("interleave_repeats", False)
    if not isinstance(interleave, bool) and interleave != "together":
        raise MatrixError(f"{where}: interleave_repeats must be true, false or together, got {interleave!r}")
    if interleave == "together":
        _check_together(configs, where)
    client_processes = _positive(data.get("client_processes", 1), f"{where}: client_processes")
    if gpu_count is not None and any(config.launch == "local" for config in configs):
        try:  # on this host, the local engines keep off a core a client process (loadtest/cpus.py)
            complete_layout(processes=client_processes)
        except ValueError as exc:
            raise MatrixError(f"{where}: client_processes: {exc}") from None
    return Matrix(name=name, workload=workload, users=users, repeats=repeats,
                  configs=tuple(configs), warmup_requests=warmup,
                  health_timeout_s=_positive(data.get("health_timeout_s", 900), f"{where}: health_timeout_s"),
                  run_timeout_s=_positive(data.get("run_timeout_s", 1800), f"{where}: run_timeout_s"),
                  interleave_repeats=bool(interleave), start_together=interleave == "together",
                  source=data, workloads=workloads,
                  client_processes=client_processes)


def default_warmup_requests(users: tuple[int, ...]) -> int:
    return max(16, 2 * max(users))


def check_gpus(configs: tuple[EngineConfig, ...], gpu_count: int) -> None:
    """Refuse a configuration that names a GPU this host does not have."""
    for config in configs:
        if not config.gpus:
            continue
        missing = [g for g in config.gpus.split(",") if int(g) >= gpu_count]
        if missing:
            have = "no GPU" if gpu_count == 0 else f"{gpu_count} GPU(s)"
            raise MatrixError(f"{config.engine} needs GPU {','.join(missing)} but this host has {have} "
                              f"(use --dry-run to check the matrix without GPUs)")


def _check_together(configs: list[EngineConfig], where: str) -> None:
    """`interleave_repeats: together` runs every configuration at once: local processes only
    (Compose projects start one at a time), and no GPU shared by two (each engine would claim
    its memory). CPU engines may share cores: the one measured runs while the others idle."""
    owner: dict[str, str] = {}
    for index, config in enumerate(configs, 1):
        if config.launch == "compose":
            raise MatrixError(f"{where}: interleave_repeats: together starts local processes "
                              f"(launch: local) only, not {config.engine} through Compose; "
                              "use interleave_repeats: true")
        if config.launch != "local" or not ENGINES[config.engine].gpu:
            continue
        name = f"configuration {index} ({config.engine} {_described(config)})"
        for gpu in config.gpus.split(","):
            if gpu in owner:
                raise MatrixError(f"{where}: interleave_repeats: together starts every configuration "
                                  f"at once, but {owner[gpu]} and {name} both use GPU {gpu}: give "
                                  "each its own gpus, or use interleave_repeats: true")
            owner[gpu] = name


def _described(config: EngineConfig) -> str:
    """A configuration's settings and GPUs in one short phrase, for a refusal."""
    settings = " ".join(f"{k}={v}" for k, v in sorted(config.settings.items()))
    replicas = f" replicas {config.replicas}" if config.replicas else ""
    return f"[{settings or 'defaults'}] GPUs {config.gpus}{replicas}"


def _expand(entry: Any, where: str) -> list[EngineConfig]:
    if not isinstance(entry, dict) or "engine" not in entry:
        raise MatrixError(f"{where}: each engine entry is a mapping with `engine: SLUG`")
    if "host" in entry:
        return [_running(entry, where)]
    _no_unknown(entry, _ENGINE_KEYS, where)
    slug = str(entry["engine"])
    if slug not in ENGINES:
        raise MatrixError(f"{where}: unknown engine {slug!r}; known: {', '.join(ENGINES)}")
    launch = str(entry.get("launch", "compose"))
    if launch not in ("local", "compose"):
        raise MatrixError(f"{where}: launch must be local or compose, got {launch!r}")
    if launch == "local" and slug not in LOCAL:
        raise MatrixError(f"{where}: launch: local runs {', '.join(LOCAL)}, not {slug}")
    fixed = _settings(entry.get("settings") or {}, f"{where}: settings")
    swept = entry.get("sweep") or {}
    if not isinstance(swept, dict):
        raise MatrixError(f"{where}: sweep must map SETTING to a list of values")
    names = sorted(swept)
    values = [_value_list(swept[n], f"{where}: sweep.{n}") for n in names]
    _settings({n: "x" for n in names}, f"{where}: sweep")  # owned/unknown-name checks
    gpu_sets = _gpu_sets(entry.get("gpus"), slug, f"{where}: gpus")
    replicas = _replicas(entry.get("replicas"), slug, launch, f"{where}: replicas")
    network = str(entry.get("network") or "")
    if network not in ("", "host"):
        raise MatrixError(f"{where}: network must be host (or left out), got {network!r}")
    if network and (launch == "local" or replicas):
        raise MatrixError(f"{where}: network: host is for one compose service (no local, no replicas)")
    configs = []
    for combo in itertools.product(*values):
        settings = {**fixed, **{n: v for n, v in zip(names, combo) if v}}
        for gpus in gpu_sets:
            configs.append(EngineConfig(slug, launch, dict(sorted(settings.items())), gpus, replicas,
                                        network, tuple(names)))
    return configs


def _running(entry: dict[str, Any], where: str) -> EngineConfig:
    """An engine someone else started: measured at `host`, never started or stopped."""
    _no_unknown(entry, _RUNNING_KEYS, where)
    slug = str(entry["engine"])
    if slug not in TARGETS:
        raise MatrixError(f"{where}: unknown engine {slug!r}; known: {', '.join(TARGETS)}")
    try:  # the check `rig run --host` and the locustfile's --host make
        host = CHECKS["host"](str(entry["host"] or ""))
    except BadValue as exc:
        raise MatrixError(f"{where}: host {exc}") from None
    gpus = entry.get("gpus") or ""
    if isinstance(gpus, list):
        gpus = ",".join(map(str, gpus))
    return EngineConfig(slug, "running", {}, str(gpus), host=host, flags_text=str(entry.get("flags") or ""))


def _check_config(config: EngineConfig, gpu_count: int | None, where: str) -> None:
    if config.launch == "running":
        return
    settings = dict(config.settings)
    if config.gpus:
        settings["GPUS"] = config.gpus
    if config.launch == "local":
        refused = sorted(_LOCAL_REFUSED & set(settings))
        if refused:
            raise MatrixError(f"{where}: launch: local serves the embedded tiny model; "
                              f"{refused[0]} is for launch: compose")
    try:
        validate(config.engine, settings)
    except SettingError as exc:
        raise MatrixError(f"{where}: {exc}") from None
    shards, gpus = int(settings.get("SHARDS") or 1), len(config.gpus.split(",")) if config.gpus else 1
    if config.replicas == "per-gpu" and gpus % shards:
        raise MatrixError(f"{where}: replicas: per-gpu with SHARDS={shards} makes replicas of {shards} GPUs "
                          f"each, which GPUs {config.gpus} ({gpus}) do not divide into")
    if gpu_count is not None:
        check_gpus((config,), gpu_count)


def _check_workload(workload: SweepWorkload, engine: str, where: str) -> None:
    target = TARGETS[engine]
    api = workload.api or target.api
    if api not in target.apis:
        raise MatrixError(f"{where}: engine {engine} speaks api {' or '.join(target.apis)}, not {api!r}")
    label = f"workloads.{workload.label}" if workload.label else "workload"
    try:
        if workload.options is not None:  # its files are hashed here; read by each cell's run
            workload_sha256(workload.prompts, workload.requests, max_tokens=workload.max_tokens,
                            source=workload.options)
        else:
            build_workload(workload.prompts, workload.requests, api=api, model="m",
                           max_tokens=workload.max_tokens, ignore_eos=workload.ignore_eos,
                           temperature=workload.temperature)
    except WorkloadError as exc:
        raise MatrixError(f"{where}: {label}: {exc}") from None


def _workloads(data: Any, base: Any, where: str) -> tuple[SweepWorkload, ...]:
    """`workloads:` NAME -> options laid over `workload:`; () when absent."""
    if data is None:
        return ()
    if not isinstance(data, dict) or not data:
        raise MatrixError(f"{where}: workloads must map NAME to workload options")
    out = []
    for name, options in data.items():
        name = str(name)
        if not name or not all(c.isalnum() or c in "-_." for c in name):
            raise MatrixError(f"{where}: workloads: {name!r}: a name is letters, digits, - _ . "
                              "(it names the cells' folders)")
        if not isinstance(options, dict):
            raise MatrixError(f"{where}: workloads.{name} must be a mapping of workload options")
        merged = {**(base if isinstance(base, dict) else {}), **options}
        out.append(replace(_workload(merged, f"{where}: workloads.{name}"), label=name))
    return tuple(out)


def _workload(data: Any, where: str) -> SweepWorkload:
    if not isinstance(data, dict):
        raise MatrixError(f"{where}: workload must be a mapping ({', '.join(sorted(_WORKLOAD_KEYS))})")
    _no_unknown(data, _WORKLOAD_KEYS | _SOURCE_KEYS, f"{where}: workload")
    per_user = data.get("requests_per_user", 0)
    try:
        slo = parse_slo(str(data.get("slo") or ""))
    except ValueError as exc:
        raise MatrixError(f"{where}: workload.slo: {exc}") from None
    source, options = _source(data, where)
    return SweepWorkload(
        prompts=str(data.get("prompts", _DEFAULTS["prompts"])),
        requests=_checked(data, "requests", where), max_tokens=_checked(data, "max_tokens", where),
        ignore_eos=bool(data.get("ignore_eos", _DEFAULTS["ignore_eos"])),
        api=str(data.get("api") or ""), temperature=_checked(data, "temperature", where),
        requests_per_user=_positive(per_user, f"{where}: workload.requests_per_user") if per_user else 0,
        slo=slo.text if slo else "", source=source, options=options)


def _checked(data: dict[str, Any], key: str, where: str) -> Any:
    """workload.`key` through the option's one check (the locustfile's and every command's),
    its default the locustfile's."""
    if key not in data:
        return _DEFAULTS[key]
    try:
        return CHECKS[key](data[key])
    except BadValue as exc:
        raise MatrixError(f"{where}: workload.{key} {exc}") from None


def _source(data: dict[str, Any], where: str) -> tuple[tuple[tuple[str, str], ...],
                                                      WorkloadOptions | None]:
    """The source options given, as text, and parsed as the rig parses them (one line when
    bad); ((), None) for a prompt set."""
    given = tuple(sorted((str(k), _scalar(v) if not isinstance(v, bool) else str(v).lower())
                         for k, v in data.items() if k in _SOURCE_KEYS))
    if not given:
        return (), None
    try:
        options = workload_options(
            SimpleNamespace(**{("workload" if k == "source" else k): v for k, v in given}))
    except WorkloadError as exc:
        raise MatrixError(f"{where}: workload: {exc}") from None
    return given, options


def _settings(data: Any, where: str) -> dict[str, str]:
    if not isinstance(data, dict):
        raise MatrixError(f"{where} must map SETTING: value")
    for name in data:
        if name in _SWEEP_OWNED:
            raise MatrixError(f"{where}: {name} is set by the sweep ({_SWEEP_OWNED[name]})")
    return {str(k): _scalar(v) for k, v in data.items() if _scalar(v)}


def _value_list(values: Any, where: str) -> list[str]:
    if not isinstance(values, list) or not values:
        raise MatrixError(f"{where} must be a non-empty list of values (null = not set)")
    out = [_scalar(v) for v in values]
    if len(set(out)) != len(out):
        raise MatrixError(f"{where} lists a value twice")
    return out


def _scalar(value: Any) -> str:
    if value is None or value is False:
        return ""
    if isinstance(value, (dict, list)):
        raise MatrixError(f"a setting value must be a single value, got {value!r}")
    return "" if str(value).lower() == "none" else str(value)


def _gpu_sets(value: Any, slug: str, where: str) -> list[str]:
    if not ENGINES[slug].gpu:
        if value:
            raise MatrixError(f"{where}: {slug} runs on CPU; leave gpus out")
        return [""]
    if value is None:
        return ["0"]
    if not isinstance(value, list) or not value:
        raise MatrixError(f"{where} must be a list of GPU sets, like [\"0\", \"0,1\"]")
    sets = [str(v) for v in value]
    if len(set(sets)) != len(sets):
        raise MatrixError(f"{where} lists a GPU set twice")
    return sets


def _replicas(value: Any, slug: str, launch: str, where: str) -> str:
    if value in (None, "", 1):
        return ""
    if ENGINES[slug].gpu and value == "per-gpu":
        return "per-gpu"
    if ENGINES[slug].gpu and launch != "local":
        raise MatrixError(f"{where}: {slug} runs on GPUs: use `replicas: per-gpu` (one per GPU of the set)")
    if ENGINES[slug].gpu:  # local processes: N replicas, each seeing the whole GPU set
        if not isinstance(value, int) or value < 1:
            raise MatrixError(f"{where}: replicas must be per-gpu or a whole number >= 1")
        return str(value)
    if not isinstance(value, int) or value < 1:
        raise MatrixError(f"{where}: {slug} runs on CPU: replicas must be a whole number >= 1")
    return str(value)


def _no_duplicates(configs: list[EngineConfig], where: str) -> None:
    seen = set()
    for config in configs:
        key = (config.engine, config.launch, tuple(config.settings.items()), config.gpus, config.replicas)
        if key in seen:
            raise MatrixError(f"{where}: {config.engine} configuration {dict(config.settings)} "
                              f"on GPUs {config.gpus or '-'} appears twice")
        seen.add(key)


def _no_unknown(data: dict[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(map(str, data)) - known)
    if unknown:
        raise MatrixError(f"{where}: unknown key {unknown[0]!r}; known: {', '.join(sorted(known))}")


def _name(value: Any, where: str) -> str:
    name = str(value or "")
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise MatrixError(f"{where}: name must be letters, digits, - _ . (it names the sweep folder)")
    return name


def _int_list(value: Any, where: str) -> tuple[int, ...]:
    if isinstance(value, int):
        value = [value]
    if not isinstance(value, list) or not value:
        raise MatrixError(f"{where} must be a list of positive whole numbers, like [8, 32]")
    numbers = tuple(_positive(v, where) for v in value)
    if len(set(numbers)) != len(numbers):
        raise MatrixError(f"{where} lists a value twice")
    return numbers


def _positive(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdecimal() \
            or int(value) < 1:
        raise MatrixError(f"{where} must be a whole number >= 1, got {value!r}")
    return int(value)
