"""GPU samples through NVML (nvidia-ml-py): memory, utilization, power, clocks, energy.

NVML indices are NVML's own order (PCI bus order), not CUDA_VISIBLE_DEVICES order. A machine
without a driver or GPUs gives no GPUs (`open_gpus` returns an empty list with the reason);
a value one GPU cannot report (power or energy on some boards) is left out of its sample.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Gpu", "close_gpus", "open_gpus"]

try:
    import pynvml
except ImportError:  # the package is a rig dependency; its absence still must not break a run
    pynvml = None


class Gpu:
    def __init__(self, index: int) -> None:
        self.index = index
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self.name = _text(pynvml.nvmlDeviceGetName(self._handle))

    def sample(self) -> dict[str, Any]:
        h = self._handle
        memory = _memory(h)
        rates = pynvml.nvmlDeviceGetUtilizationRates(h)
        row: dict[str, Any] = {
            "gpu": self.index, "mem_used_mib": memory.used / 2**20,
            "mem_total_mib": memory.total / 2**20, "util_pct": rates.gpu,
            "mem_util_pct": rates.memory,
        }
        for name, read in (
            ("power_w", lambda: pynvml.nvmlDeviceGetPowerUsage(h) / 1000),
            ("energy_mj", lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h)),
            ("sm_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
            ("mem_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)),
            ("temp_c", lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)),
        ):
            try:
                row[name] = read()
            except pynvml.NVMLError:
                continue
        return row


def open_gpus(indices: list[int] | None) -> tuple[list[Gpu], str]:
    """The GPUs to sample (all visible ones when `indices` is None) and why none, if none."""
    if pynvml is None:
        return [], "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
    except pynvml.NVMLError as exc:
        return [], f"NVML unavailable: {exc}"
    wanted = list(range(count)) if indices is None else indices
    missing = [i for i in wanted if i >= count]
    if missing:
        return [], f"no GPU {missing} (NVML sees {count})"
    if not wanted:
        return [], "NVML sees no GPU"
    return [Gpu(i) for i in wanted], ""


def close_gpus() -> None:
    if pynvml is not None:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _memory(handle: Any) -> Any:
    """Memory as nvidia-smi shows it: v2 leaves out what the driver reserves (about 600 MiB on
    an H200), which v1 counts as used. Older drivers or bindings have only v1."""
    try:
        return pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
    except (AttributeError, TypeError, pynvml.NVMLError):
        return pynvml.nvmlDeviceGetMemoryInfo(handle)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
