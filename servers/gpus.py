"""How many GPUs this host has, from NVML (nvidia-ml-py); 0 where there is no driver. And what
every engine's environment keeps on a host of several GPUs."""

from __future__ import annotations

__all__ = ["MULTI_GPU_ENV", "gpu_count"]

# NVLink multicast (NVLS) off in every engine the rig starts, local process or Compose service:
# NCCL, torch's symmetric memory and NVSHMEM each use it by themselves on a host of several GPUs
# (harmless on one).
MULTI_GPU_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}


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
