"""Everything the rig knows about one engine, in one value: its ``EngineSpec``.

Each engine module in ``servers/`` (``servers/vllm_cpu.py``, ``servers/tgi.py``, ...) defines
``SPEC = EngineSpec(...)``, and ``servers/registry.py`` finds every such module by itself, so
adding an engine is that one module plus the regenerated Compose file. The parts:

- ``container``: how Compose starts it (``servers.engine.Engine``); None for a hosted API.
- ``target``: how the client talks to it (``Target``): default API, quirks, and its port, which
  for a container engine is the container's host port (``ENGINE.host_port``), typed once.
- ``local``: how it starts as a process on this machine (``LocalRecipe``), where the rig can.
- ``metrics``: canonical field -> its Prometheus names, first found wins; None with
  ``metrics_none`` saying why when it exports nothing the rig reads.
- ``prefix_cache``: how its prefix cache is emptied between runs, or why it cannot be.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from servers.engine import Engine

__all__ = ["EngineSpec", "LocalRecipe", "MetricNames", "PrefixCache", "Target"]


MetricNames = dict[str, list[str]]
OPENAI_APIS = ("completions", "chat")


@dataclass(frozen=True)
class Target:
    """How the load generator reaches the engine and what its API does differently."""

    port: int
    api: str = "completions"  # default API: completions | chat | generate
    apis: tuple[str, ...] = OPENAI_APIS
    api_key_env: str = "LLM_API_KEY"
    # How --ignore-eos reaches the engine: "ignore_eos" (the vLLM-family body field) or
    # "generation_config" (transformers serve: a per-request config with no EOS token).
    ignore_eos_as: str = "ignore_eos"
    # An empty completion chunk is a token whose text is not complete yet (vLLM's byte-level
    # tokens); False where it never is and the engine sends one before it generates
    # (text-generation-webui), which would otherwise be the run's first token.
    empty_chunk_is_token: bool = True
    # (Prometheus counters, port offset): the engine's own count of the tokens it generated, on
    # /metrics at its port + offset, where its usage counts are not that (text-generation-webui
    # re-tokenizes its answer); the first of the names found there is read (one a loader), and a
    # run's output tokens are its change over the run (loadtest/telemetry/output_counter.py).
    # None where usage counts the tokens generated.
    output_tokens_counter: tuple[tuple[str, ...], int] | None = None
    # The engine serves one model that its /v1/models does not list (transformers serve lists
    # the hub cache): the probe reads the name from its refusal of another model.
    pinned_model: bool = False
    # The engine streams each chunk's token ids when asked (vLLM's `return_token_ids`): what
    # --recount checks against the model's tokenizer.
    token_ids: bool = False
    # How the engine takes a regex-constrained answer (loadtest/workload/structured.py
    # REGEX_FIELDS): "structured_outputs" (vLLM), "regex" (SGLang), "grammar" (llama.cpp: the
    # task's GBNF twin of its regex); "" where it takes none.
    regex_as: str = ""
    # How a request names its LoRA adapter (loadtest/workload/lora.py): "model", the request's
    # model name (vLLM's --lora-modules NAME=PATH); "lora", llama.cpp's `lora` field, the
    # adapter's id (the order of the server's --lora flags).
    lora_as: str = "model"
    # A hosted, billed endpoint: its base URL and key come from the environment (never from a
    # file or a results column), and --max-spend-requests caps a run's requests by default.
    hosted: bool = False
    base_url_env: str = ""
    default_base_url: str = ""


@dataclass(frozen=True)
class LocalRecipe:
    """How one engine starts as a local process (no container); ``loadtest.local_engine``
    does the rest (own process group, health wait, stop, log).

    ``command(port, extra_args)`` is the argv; ``missing()`` says, in one line naming the
    install step, why the engine cannot start here (None when it can). ``bind_compute(cpus)``
    is the environment that puts the engine's compute threads on those cores (a Linux CPU
    list), for engines that bind them themselves. ``flags``: the settings' flag templates of
    the version run locally, where they differ from its container's (None: the container's);
    a sweep's settings become flags through them. ``front_ends``: the names (a part of each, as
    ``loadtest.client.engine_cpu.process_name`` gives them) of the processes that take and
    stream the HTTP requests apart from the model's, each one Python process whose ceiling is
    one core; () where the engine has none apart. ``env_prefixes``: the variables the engine reads
    itself from the environment it is handed (its own settings: VLLM_..., LLAMA_ARG_...), by
    the start of their names; those set are recorded with its command
    (``loadtest.local_engine.LocalEngine.flags``)."""

    slug: str
    command: Callable[[int, list[str]], list[str]]
    missing: Callable[[], str | None]
    model_name: str
    env: dict[str, str] = field(default_factory=dict)
    health_path: str = "/health"
    bind_compute: Callable[[str], dict[str, str]] = lambda cpus: {}
    flags: dict[str, tuple[str, ...]] | None = None
    front_ends: tuple[str, ...] = ()
    env_prefixes: tuple[str, ...] = ("CUDA_VISIBLE_DEVICES",)


@dataclass(frozen=True)
class PrefixCache:
    """``reset(url, headers)`` empties the engine's prefix cache and says what it did (raising
    ``servers.prefix_cache.NotOffered`` when this server was started without the way); None,
    with ``none_why``, for an engine that offers no way."""

    reset: Callable[[str, dict[str, str]], str] | None
    none_why: str = ""


@dataclass(frozen=True)
class EngineSpec:
    slug: str
    target: Target
    prefix_cache: PrefixCache
    container: Engine | None = None
    hosted_why: str = ""  # why there is no container (a hosted API)
    local: LocalRecipe | None = None
    metrics: MetricNames | None = None
    metrics_none: str = ""

    def __post_init__(self) -> None:
        if self.container is not None and self.container.slug != self.slug:
            raise ValueError(f"{self.slug}: its container is named {self.container.slug}")
        if self.local is not None and self.local.slug != self.slug:
            raise ValueError(f"{self.slug}: its local recipe is named {self.local.slug}")
        if (self.container is None) == (not self.hosted_why):
            raise ValueError(f"{self.slug}: give a container or, for a hosted API, hosted_why")
        if (self.metrics is None) == (not self.metrics_none):
            raise ValueError(f"{self.slug}: give metric names or metrics_none saying why not")
        if (self.prefix_cache.reset is None) == (not self.prefix_cache.none_why):
            raise ValueError(f"{self.slug}: give a prefix-cache reset or the reason there is none")
