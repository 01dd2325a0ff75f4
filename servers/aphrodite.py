"""Aphrodite Engine (alpindale/aphrodite-openai, v0.6 era), port 2242.

The v0.6 image starts ``python3 -m aphrodite.endpoints.openai.api_server`` and
takes vLLM-style flags, except speculation, which v0.6 spells
``--speculative-model [ngram] --num-speculative-tokens N``.
"""

from servers.engine import Engine
from servers.prefix_cache import vllm_reset
from servers.spec import EngineSpec, PrefixCache, Target
from servers.vllm import VLLM_FLAGS, VLLM_REFUSED, vllm_metric_names

__all__ = ["ENGINE", "SPEC"]

ENGINE = Engine(
    slug="aphrodite",
    image="alpindale/aphrodite-openai:v0.6.4",
    image_source="v0.6.4, pinned by other projects because :latest lacked the binary; v0.9+ images not verified",
    host_port=2242,
    container_port=2242,
    args=("--host", "0.0.0.0", "--port", "2242"),
    flags={
        **VLLM_FLAGS,
        "SPECULATE": (
            "--speculative-model", "[ngram]",
            "--num-speculative-tokens", "{}",
            "--ngram-prompt-lookup-max", "4",
        ),
    },
    refused={"MAX_INPUT_TOKENS": VLLM_REFUSED["MAX_INPUT_TOKENS"].replace("vLLM", "Aphrodite")},
    defaults={"MODEL": "Qwen/Qwen2.5-0.5B-Instruct"},
    service={"ipc": "host"},
)

SPEC = EngineSpec(
    slug="aphrodite",
    container=ENGINE,
    target=Target(ENGINE.host_port),
    metrics=vllm_metric_names("aphrodite"),
    # vLLM's route; unverified on the v0.6 image (no registry here): a 404 reads "none"
    prefix_cache=PrefixCache(vllm_reset),
)
