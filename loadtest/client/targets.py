"""The engines the rig knows: default port on localhost, default API, how to find the model.

One slug per engine everywhere (compose service, servers/ entry, `--engine`, results column).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from loadtest.client.protocols import openai, tgi

__all__ = ["Target", "TARGETS", "dialect_for"]


@dataclass(frozen=True)
class Target:
    port: int
    api: str  # default API: completions | chat | generate
    apis: tuple[str, ...]
    api_key_env: str = "LLM_API_KEY"
    # How --ignore-eos reaches the engine: "ignore_eos" (the vLLM-family body field) or
    # "generation_config" (transformers serve: a per-request config with no EOS token).
    ignore_eos_as: str = "ignore_eos"
    # The engine serves one model that its /v1/models does not list (transformers serve lists
    # the hub cache): the probe reads the name from its refusal of another model.
    pinned_model: bool = False
    # The engine streams each chunk's token ids when asked (vLLM's `return_token_ids`): what
    # --recount checks against the model's tokenizer.
    token_ids: bool = False
    # A hosted, billed endpoint: its base URL and key come from the environment (never from a
    # file or a results column), and --max-spend-requests caps a run's requests by default.
    hosted: bool = False
    base_url_env: str = ""
    default_base_url: str = ""


_OPENAI_APIS = ("completions", "chat")
TARGETS: dict[str, Target] = {
    "vllm": Target(8000, "completions", _OPENAI_APIS, token_ids=True),
    "vllm-cpu": Target(8000, "completions", _OPENAI_APIS, token_ids=True),
    "tgi": Target(8080, "generate", ("generate", "chat")),
    "aphrodite": Target(2242, "completions", _OPENAI_APIS),
    "textgen": Target(5000, "completions", _OPENAI_APIS),
    "llamacpp": Target(8081, "completions", _OPENAI_APIS),
    "llamacpp-cpu": Target(8082, "completions", _OPENAI_APIS),
    "sglang": Target(30000, "completions", _OPENAI_APIS),
    "transformers": Target(8090, "completions", _OPENAI_APIS, ignore_eos_as="generation_config",
                           pinned_model=True),
    "openai": Target(443, "chat", _OPENAI_APIS, api_key_env="OPENAI_API_KEY", hosted=True,
                     base_url_env="OPENAI_BASE_URL", default_base_url="https://api.openai.com"),
    # Hugging Face Inference Endpoints: TGI behind them (its OpenAI chat route or /generate_stream)
    "hf-endpoint": Target(443, "chat", ("chat", "generate"), api_key_env="HF_TOKEN", hosted=True,
                          base_url_env="HF_ENDPOINT_URL"),
}


def dialect_for(api: str) -> ModuleType:
    return tgi if api == "generate" else openai
