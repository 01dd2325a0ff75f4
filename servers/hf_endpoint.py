"""Hugging Face Inference Endpoints: TGI behind them (its OpenAI chat route or /generate_stream),
a client target with no container. The URL comes from ``HF_ENDPOINT_URL``, the key from
``HF_TOKEN``.
"""

from servers.spec import EngineSpec, PrefixCache, Target

__all__ = ["SPEC"]

SPEC = EngineSpec(
    slug="hf-endpoint",
    hosted_why="a hosted API: Hugging Face runs the engine",
    target=Target(443, api="chat", apis=("chat", "generate"), api_key_env="HF_TOKEN", hosted=True,
                  base_url_env="HF_ENDPOINT_URL"),
    metrics_none="an Inference Endpoint does not publish its TGI's /metrics",
    prefix_cache=PrefixCache(None, "TGI has no endpoint to empty its prefix cache, and the endpoint is hosted"),
)
