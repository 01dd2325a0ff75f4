"""Keep secrets out of everything the rig writes: flags as given, URLs, error texts.

A value is hidden when it follows a secret-looking flag (--api-key X, --api-key=X, HF_TOKEN=X)
or looks like a token itself (hf_..., sk-...); credentials in a URL's user-info are dropped.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["redact", "redact_url"]

HIDDEN = "***"
_SECRET_NAME = r"[\w-]*(?:api[_-]?keys?|token|secret|password|admin[_-]?key)(?![\w-])"
_FLAG_VALUE = re.compile(rf"(?i)(--?{_SECRET_NAME})(=|\s+)(\S+)")
_ENV_VALUE = re.compile(rf"(?i)\b({_SECRET_NAME})=(\S+)")
_TOKEN = re.compile(r"\b(hf_[A-Za-z0-9]{8,}|sk-[A-Za-z0-9_-]{8,})")


def redact(text: str) -> str:
    text = _FLAG_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{HIDDEN}", text)
    text = _ENV_VALUE.sub(lambda m: f"{m.group(1)}={HIDDEN}", text)
    return _TOKEN.sub(HIDDEN, text)


def redact_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))
