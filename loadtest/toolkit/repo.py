"""The repository root, computed here once: every module that reads or runs something of the
checkout (models/, results/, build/, docker-compose.yml, the locustfile, git) starts from REPO."""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO"]

REPO = Path(__file__).resolve().parents[2]
