"""Emptying an engine's prefix cache before a run, so a run's prefix-cache hits are its own.

    reset_prefix_cache("http://127.0.0.1:8000", SPECS["vllm-cpu"])
        -> "reset: POST /reset_prefix_cache"         what was done
        -> "none: vLLM serves /reset_prefix_cache only with VLLM_SERVER_DEV_MODE=1"
        -> "failed: HTTP 500 from POST /reset_prefix_cache"

The text goes into the run's row (``prefix_cache_reset``); a failed reset is a warning there,
never a reason to stop the run. The ways each engine offers:

- vLLM: ``POST /reset_prefix_cache``, a development endpoint that vLLM 0.32 serves only when
  started with ``VLLM_SERVER_DEV_MODE=1`` (the rig's local vllm-cpu sets it: it listens on
  127.0.0.1 only). It answers ``{"success": false}`` while requests still hold blocks.
- SGLang: ``POST /flush_cache``, answered in text ("Cache flushed. ..."), 400 when refused
  (while requests run).
- llama.cpp: ``POST /slots/ID?action=erase`` for each slot ``GET /slots`` lists; the server
  answers 501 unless it was started with ``--slot-save-path``. Its host-memory prompt cache
  (``--cache-ram``, 8 GiB by default) has no endpoint, so prompts saved there survive.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from servers.spec import EngineSpec

__all__ = ["NotOffered", "llamacpp_erase_slots", "reset_prefix_cache", "sglang_flush", "vllm_reset"]

_TIMEOUT_S = 10.0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy


class NotOffered(Exception):
    """This server was started without its reset (e.g. vLLM without dev mode): "none", not
    "failed"."""


def reset_prefix_cache(url: str, spec: EngineSpec, headers: dict[str, str] | None = None) -> str:
    """Empty ``spec``'s prefix cache at ``url``; what was done, "none: why" or "failed: why"."""
    if spec.prefix_cache.reset is None:
        return f"none: {spec.prefix_cache.none_why}"
    try:
        return spec.prefix_cache.reset(url.rstrip("/"), dict(headers or {}))
    except NotOffered as exc:
        return f"none: {exc}"
    except urllib.error.HTTPError as exc:
        return f"failed: HTTP {exc.code} from {exc.url}"
    except (OSError, ValueError) as exc:  # refused, timed out, not JSON
        return f"failed: {exc}"


def vllm_reset(url: str, headers: dict[str, str]) -> str:
    try:
        answer = _call("POST", f"{url}/reset_prefix_cache", headers)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise NotOffered("vLLM serves /reset_prefix_cache only with VLLM_SERVER_DEV_MODE=1") from None
        raise
    if isinstance(answer, dict) and answer.get("success") is False:
        return "failed: vLLM answered success=false (requests still hold cache blocks)"
    return "reset: POST /reset_prefix_cache"


def sglang_flush(url: str, headers: dict[str, str]) -> str:
    # its answer is text ("Cache flushed.\nPlease check backend logs ..."), 400 when refused
    _send("POST", f"{url}/flush_cache", headers)
    return "reset: POST /flush_cache"


def llamacpp_erase_slots(url: str, headers: dict[str, str]) -> str:
    try:
        slots = _call("GET", f"{url}/slots", headers)
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 501):
            raise NotOffered("llama-server runs with --no-slots (no /slots endpoint)") from None
        raise
    ids = [slot["id"] for slot in slots if isinstance(slot, dict) and "id" in slot]
    for slot_id in ids:
        try:
            _call("POST", f"{url}/slots/{slot_id}?action=erase", headers)
        except urllib.error.HTTPError as exc:
            if exc.code == 501:
                raise NotOffered("llama-server erases slots only when started with "
                                 "--slot-save-path") from None
            raise
    return (f"reset: erased {len(ids)} slots (POST /slots/ID?action=erase); "
            "the host prompt cache (--cache-ram) has no reset")


def _send(method: str, url: str, headers: dict[str, str]) -> bytes:
    request = urllib.request.Request(url, method=method, headers=headers,
                                     data=b"" if method == "POST" else None)
    with _OPENER.open(request, timeout=_TIMEOUT_S) as response:
        return response.read()


def _call(method: str, url: str, headers: dict[str, str]) -> Any:
    body = _send(method, url, headers)
    return json.loads(body) if body.strip() else None
