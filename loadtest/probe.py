"""Ask the engine, once, before the run: is it there, which model does it serve, which version.

A plain blocking GET with a short timeout; any failure is one line for the user.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from .redact import redact_url

__all__ = ["EngineInfo", "ProbeError", "probe_engine"]


class ProbeError(RuntimeError):
    """The engine cannot be reached or does not answer as expected; one line for the user."""


@dataclass(frozen=True)
class EngineInfo:
    model: str
    engine_version: str
    model_root: str = ""  # where the engine loaded the model from (vLLM's /v1/models "root")


def probe_engine(url: str, api: str, headers: dict[str, str], timeout_s: float = 10.0) -> EngineInfo:
    if api == "generate":  # TGI native
        info = _get_json(url + "/info", headers, timeout_s)
        return EngineInfo(str(info.get("model_id", "")), str(info.get("version", "")))
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


def _get_json(url: str, headers: dict[str, str], timeout_s: float) -> dict[str, Any]:
    shown = redact_url(url)
    request = urllib.request.Request(url, headers={k: v for k, v in headers.items()
                                                   if k == "Authorization"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    try:
        with opener.open(request, timeout=timeout_s) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise ProbeError(f"{shown} answered HTTP {exc.code}") from None
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
