"""A run's output tokens from the engine's own counter, for an engine whose usage counts are not
the tokens it generated (its spec's ``Target.output_tokens_counter``: text-generation-webui,
whose usage re-tokenizes its answer; its llama.cpp loader's llama-server counts what it
generated, and on its ExLlamav3 loader the rig's boot shim serves exllamav3's own count).

    before = read_output_counter(url, target)                 # before the run's first request
    row.update(counted_by_engine(row, before, read_output_counter(url, target)))  # after its last

The counter's change over the run is the run's output tokens when the run was the engine's only
client (nothing else sent it requests meanwhile: assumed, not seen, and said in the source
``engine_counter:sole_client``) and every request it sent completed (a failed request's tokens
are in the counter, not in the row). Then ``output_tokens``, ``avg_output_tokens`` and
``output_tok_per_s`` are the engine's, and so are ``min/max_output_tokens`` when the counter
proves every request made its ``max_tokens`` (change = completed x max_tokens, one length for
all), which is what the equal-work check (unequal_work) reads; otherwise those two stay the usage
counts. When the counter cannot be read, the row stays on usage. The records keep their usage
counts either way.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from loadtest.telemetry.engine import parse_prometheus, scrape
from servers.spec import Target

__all__ = ["SOURCE", "counted_by_engine", "counter_url", "read_output_counter"]

SOURCE = "engine_counter:sole_client"
# Read once before a run and once after it, off the clock: an engine busy finishing its last
# answers, on a starved host, can take longer than a telemetry sample's 2 s to answer, and one
# failed read would leave the whole run on usage's counts.
_TIMEOUT_S = 10.0
_ATTEMPTS = 3  # reads that time out
_DEFAULT_PORTS = {"http": 80, "https": 443}


def counter_url(url: str, port_offset: int) -> str:
    """The engine's base URL with its port moved by `port_offset` (and no path)."""
    parts = urlsplit(url)
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    port = (parts.port or _DEFAULT_PORTS.get(parts.scheme, 80)) + port_offset
    return f"{parts.scheme}://{host}:{port}"


def read_output_counter(url: str, target: Target) -> float | None:
    """The engine's generated-token counter now; None for an engine without one in its spec,
    or when it cannot be read."""
    if target.output_tokens_counter is None:
        return None
    names, port_offset = target.output_tokens_counter
    for _ in range(_ATTEMPTS):
        try:
            counters = parse_prometheus(scrape(counter_url(url, port_offset), _TIMEOUT_S))
            values = next((counters[name] for name in names if counters.get(name)), None)
            return sum(values) if values else None
        except (OSError, ValueError) as exc:
            if not _timed_out(exc):  # refused, or not Prometheus text: asking again changes nothing
                return None
    return None


def _timed_out(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None), TimeoutError)


def counted_by_engine(row: dict[str, Any], before: float | None, after: float | None) -> dict[str, Any]:
    """The row's output-token columns from the counter's change (see the module's text), or
    nothing when the row must stay on usage."""
    completed = row.get("completed") or 0
    if (before is None or after is None or after < before or not completed
            or row.get("failed") or completed != row.get("requests_sent")):
        return {}
    tokens = int(after - before)
    seconds = row.get("completion_time_s")
    columns: dict[str, Any] = {"output_tokens": tokens, "output_tokens_source": SOURCE,
                               "avg_output_tokens": tokens / completed,
                               "output_tok_per_s": tokens / seconds if seconds else None}
    max_tokens = row.get("max_tokens")
    if not row.get("output_len") and max_tokens and tokens == completed * max_tokens:
        columns["min_output_tokens"] = columns["max_output_tokens"] = max_tokens
    return columns
