"""Aphrodite Engine (alpindale/aphrodite-openai, v0.6 era), port 2242.

The v0.6 image starts ``python3 -m aphrodite.endpoints.openai.api_server`` and
takes vLLM-style flags, except speculation, which v0.6 spells
``--speculative-model [ngram] --num-speculative-tokens N``.

Locally (``RECIPE``, a GPU host without Docker) it is aphrodite-engine 0.21.0, built like vLLM's
recipe (``servers.vllm.gpu_recipe``: ``python -m aphrodite.entrypoints.cli.main serve``, the
settings from the environment under the .env names APHRODITE_MODEL, APHRODITE_GPUS, ...,
RIG_APHRODITE_PYTHON, and APHRODITE_* where vLLM has VLLM_*). 0.21 is
rebased on vLLM V1 and speculates as vLLM does: ``--speculative-config`` (dotted keys accepted)
with no ``--speculative-model`` flag any more (aphrodite/engine/arg_utils.py,
aphrodite/utils/argparse_utils.py in its wheel), so SPECULATE takes vLLM's template there
(``LOCAL_FLAGS``); every other setting gives the Compose service's flag.
"""

from servers.engine import Engine
from servers.prefix_cache import vllm_reset
from servers.spec import EngineSpec, PrefixCache, Target
from servers.vllm import VLLM_FLAGS, VLLM_REFUSED, gpu_recipe, vllm_metric_names

__all__ = ["ENGINE", "LOCAL_FLAGS", "RECIPE", "SPEC"]

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

# aphrodite-engine 0.21.0's flags: the service's (v0.6.4 image), but SPECULATE spelt as vLLM V1
LOCAL_FLAGS = {**ENGINE.flags, "SPECULATE": VLLM_FLAGS["SPECULATE"]}
RECIPE = gpu_recipe(ENGINE, LOCAL_FLAGS)

SPEC = EngineSpec(
    slug="aphrodite",
    container=ENGINE,
    target=Target(ENGINE.host_port),
    local=RECIPE,
    metrics=vllm_metric_names("aphrodite"),
    # vLLM's route: served by 0.21 with APHRODITE_SERVER_DEV_MODE=1 (its local recipe sets it;
    # aphrodite/entrypoints/serve/cache/api_router.py); unverified on the v0.6 image (no
    # registry here): a 404 reads "none"
    prefix_cache=PrefixCache(vllm_reset),
)
