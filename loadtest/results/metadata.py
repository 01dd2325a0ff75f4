"""Who measured what, collected at run time (never rebuilt at report time).

One collect_* function per source; each leaves out what it cannot read rather than guessing.
"""

from __future__ import annotations

import platform
import socket
from pathlib import Path
from typing import Any

import locust

from loadtest.cpus import allowed_cpus, cpu_model, format_cpus
from loadtest.results.version import rig_version

__all__ = ["collect_rig_metadata", "collect_client_metadata", "collect_model_metadata"]


def collect_rig_metadata() -> dict[str, Any]:
    return {"rig_version": rig_version(), "locust_version": locust.__version__,
            "python_version": platform.python_version()}


def collect_client_metadata(processes: int) -> dict[str, Any]:
    cores = allowed_cpus()
    return {"client_hostname": socket.gethostname(), "client_cpu_model": cpu_model(),
            "client_cpu_count": len(cores), "client_cpus": format_cpus(cores),
            "processes": processes}


def collect_model_metadata(model: str) -> dict[str, Any]:
    """The model's digest when it is a local folder built here (tiny_model.py writes it)."""
    digest_file = Path(model) / "model_sha256.txt"
    if digest_file.is_file():
        return {"model_sha256": digest_file.read_text().strip()}
    return {}
