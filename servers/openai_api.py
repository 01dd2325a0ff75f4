"""OpenAI's hosted API (or any OpenAI-compatible service): a client target, no container.

The base URL comes from ``OPENAI_BASE_URL`` (default https://api.openai.com) and the key from
``OPENAI_API_KEY``, never from a file or a results column.
"""

from servers.spec import EngineSpec, PrefixCache, Target

__all__ = ["SPEC"]

SPEC = EngineSpec(
    slug="openai",
    hosted_why="a hosted API: the provider runs the engine",
    target=Target(443, api="chat", api_key_env="OPENAI_API_KEY", hosted=True,
                  base_url_env="OPENAI_BASE_URL", default_base_url="https://api.openai.com"),
    metrics_none="a hosted API exports no Prometheus metrics to its clients",
    prefix_cache=PrefixCache(None, "a hosted API's prompt cache is the provider's, not the client's to empty"),
)
