"""Ask the engine, once, before the run: is it there, which model does it serve, which version.

Plain blocking GETs with a short timeout; any failure is one line for the user. An engine
pinned to one model that it does not list (transformers serve) is asked with one POST naming
no model, which it refuses (HTTP 400) before generating anything, naming the model it serves.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from .protocols.openai import PATHS as OPENAI_PATHS
from .redact import redact_url

__all__ = ["EngineInfo", "ProbeError", "probe_engine"]


class ProbeError(RuntimeError):
    """The engine cannot be reached or does not answer as expected; one line for the user."""


@dataclass(frozen=True)
class EngineInfo:
    model: str
    engine_version: str
    model_root: str = ""  # where the engine loaded the model from (vLLM's /v1/models "root")


def probe_engine(url: str, api: str, headers: dict[str, str], timeout_s: float = 10.0,
                 pinned_model: bool = False) -> EngineInfo:
    if api == "generate":  # TGI native
        info = _get_json(url + "/info", headers, timeout_s)
        return EngineInfo(str(info.get("model_id", "")), str(info.get("version", "")))
    if pinned_model:
        model = _pinned_model(url, api, headers, timeout_s)
        return EngineInfo(model, "", model)
    models = _get_json(url + "/v1/models", headers, timeout_s)
    data = models.get("data") or []
    first = data[0] if data and isinstance(data[0], dict) else {}
    model, root = str(first.get("id", "")), str(first.get("root") or "")
    version = ""
    try:
        version = str(_get_json(url + "/version", headers, timeout_s).get("version", ""))
    except ProbeError:
        pass  # not every engine has /version
    return EngineInfo(model, version, root)


_PINNED = re.compile(r"pinned to '(.+)'; requested")


def _pinned_model(url: str, api: str, headers: dict[str, str], timeout_s: float) -> str:
    """transformers serve answers a request for any other model with HTTP 400 "Server is pinned
    to 'X'; requested ''." (checked in transformers 5.17 and 5.23); "" when it names none."""
    body = json.dumps({"model": ""}).encode()
    try:
        _get_json(url + OPENAI_PATHS[api], {**headers, "Content-Type": "application/json"}, timeout_s,
                  data=body)
    except _HTTPStatus as exc:
        found = _PINNED.search(exc.body)
        return found.group(1) if found else ""
    return ""


class _HTTPStatus(ProbeError):
    def __init__(self, message: str, body: str) -> None:
        super().__init__(message)
        self.body = body


def _get_json(url: str, headers: dict[str, str], timeout_s: float,
              data: bytes | None = None) -> dict[str, Any]:
    """GET ``url`` (POST ``data`` when given) and parse its JSON object answer."""
    shown = redact_url(url)
    sent = ("Authorization", "Content-Type") if data is not None else ("Authorization",)
    request = urllib.request.Request(url, data=data,
                                     headers={k: v for k, v in headers.items() if k in sent})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    try:
        with opener.open(request, timeout=timeout_s) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        text = exc.read(2000).decode("utf-8", "replace")
        raise _HTTPStatus(f"{shown} answered HTTP {exc.code}", text) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ProbeError(f"cannot reach {shown}: {reason}") from None
    try:
        parsed = json.loads(body)
    except ValueError:
        raise ProbeError(f"{shown} did not answer JSON") from None
    if not isinstance(parsed, dict):
        raise ProbeError(f"{shown} did not answer a JSON object")
    return parsed
