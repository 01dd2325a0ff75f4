"""How many GPUs this host has, from NVML (nvidia-ml-py); 0 where there is no driver."""

from __future__ import annotations

__all__ = ["gpu_count"]


def gpu_count() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no library, no driver, no device: all mean "no GPU"
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:  # noqa: BLE001
        return 0
    finally:
        pynvml.nvmlShutdown()
