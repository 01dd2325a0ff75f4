"""The rig's engine settings: names, value checks and GPU lists.

A setting is named once here (``MAX_TOTAL_TOKENS``) and set per engine in
``.env`` with the engine's prefix (``TGI_MAX_TOTAL_TOKENS``), because Compose
interpolates the whole file and one engine's value must never reach another.
Each engine module in ``servers/`` says which settings it takes and which
engine flag each becomes.
"""

from __future__ import annotations

import re

__all__ = [
    "DESCRIPTIONS",
    "FLAG_SETTINGS",
    "SERVICE_SETTINGS",
    "SETTINGS",
    "SettingError",
    "check_value",
    "env_name",
    "parse_gpus",
]


class SettingError(ValueError):
    """A setting the rig refuses; the message is one line that names the engine."""


# Settings that become engine flags, in the order their flags are written.
FLAG_SETTINGS: tuple[str, ...] = (
    "MODEL",  # hub id or a path under /models (the mounted MODELS_DIR)
    "SERVED_MODEL_NAME",  # the name clients send as "model"
    "DTYPE",  # float16 | bfloat16 | ...
    "QUANTIZE",  # awq | gptq | fp8 | ... (the engine's own names)
    "SPECULATE",  # n-gram speculation: number of speculated tokens
    "MAX_TOTAL_TOKENS",  # per request: prompt + generated tokens
    "MAX_INPUT_TOKENS",  # per request: prompt tokens
    "MAX_BATCH_PREFILL_TOKENS",  # tokens prefilled in one batch
    "MAX_CONCURRENT_REQUESTS",  # requests in flight at once
    "SHARDS",  # tensor parallel degree
    "GPU_MEMORY_FRACTION",  # share of each GPU's memory the engine may use
    "EXTRA_ARGS",  # passed verbatim (split like a shell), last
)

# Settings that shape the container, not the command line.
SERVICE_SETTINGS: tuple[str, ...] = ("IMAGE", "PORT", "GPUS", "CPUS", "HOST")

DESCRIPTIONS: dict[str, str] = {
    "MODEL": "hub id, or a local folder as /models/NAME (MODELS_DIR is mounted at /models)",
    "SERVED_MODEL_NAME": "the model name clients send in requests",
    "DTYPE": "weights/activations dtype: float16, bfloat16, ...",
    "QUANTIZE": "quantization method, in the engine's own words (awq, gptq, fp8, ...)",
    "SPECULATE": "n-gram speculative decoding: tokens speculated per step",
    "MAX_TOTAL_TOKENS": "per request: prompt + generated tokens",
    "MAX_INPUT_TOKENS": "per request: prompt tokens",
    "MAX_BATCH_PREFILL_TOKENS": "tokens prefilled in one batch step",
    "MAX_CONCURRENT_REQUESTS": "requests in flight at once",
    "SHARDS": "tensor-parallel degree (GPUs one model is split over)",
    "GPU_MEMORY_FRACTION": "share of each GPU's memory the engine may take, in (0, 1]",
    "EXTRA_ARGS": "more engine flags, passed last and verbatim",
    "IMAGE": "container image (the pinned tag unless set)",
    "PORT": "host port, published on BIND_ADDRESS",
    "GPUS": "GPU indexes as nvidia-smi shows them, e.g. 0 or 1,2",
    "CPUS": "host cores the container may use, e.g. 1-15 (empty: all); leave the client's apart",
    "HOST": "address the engine listens on inside its container",
}

SETTINGS: tuple[str, ...] = FLAG_SETTINGS + SERVICE_SETTINGS

_INT_SETTINGS = {
    "SPECULATE",
    "MAX_TOTAL_TOKENS",
    "MAX_INPUT_TOKENS",
    "MAX_BATCH_PREFILL_TOKENS",
    "MAX_CONCURRENT_REQUESTS",
    "SHARDS",
}
_DTYPES = {"auto", "half", "float16", "bfloat16", "float", "float32"}
_TOKEN = re.compile(r"^[A-Za-z0-9._/:@+=,-]+$")
_GPUS = re.compile(r"^\d+(,\d+)*$")
_CPUS = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


def env_name(engine: str, setting: str) -> str:
    """``env_name("vllm-cpu", "MODEL")`` -> ``"VLLM_CPU_MODEL"``."""
    return f"{engine.upper().replace('-', '_')}_{setting}"


def parse_gpus(value: str, gpu_count: int | None = None) -> list[str]:
    """``"1,2"`` -> ``["1", "2"]``; refuses repeats and indexes >= ``gpu_count``."""
    if not _GPUS.match(value):
        raise SettingError(f"GPUS must be GPU indexes separated by commas, like 0 or 1,2 (got {value!r})")
    ids = value.split(",")
    if len(set(ids)) != len(ids):
        raise SettingError(f"GPUS lists a GPU twice ({value!r})")
    if gpu_count is not None:
        missing = [i for i in ids if int(i) >= gpu_count]
        if missing:
            raise SettingError(f"GPUS names GPU {','.join(missing)} but this host has {gpu_count} GPU(s)")
    return ids


def check_value(setting: str, value: str) -> None:
    """Raise SettingError if ``value`` is not a valid value for ``setting``."""
    if setting not in SETTINGS:
        raise SettingError(f"unknown setting {setting!r}; known: {', '.join(SETTINGS)}")
    if setting == "EXTRA_ARGS":
        return
    if setting in _INT_SETTINGS:
        if not value.isdecimal() or int(value) < 1:
            raise SettingError(f"{setting} must be a whole number >= 1 (got {value!r})")
    elif setting == "GPU_MEMORY_FRACTION":
        try:
            fraction = float(value)
        except ValueError:
            fraction = -1.0
        if not 0 < fraction <= 1:
            raise SettingError(f"GPU_MEMORY_FRACTION must be a number in (0, 1] (got {value!r})")
    elif setting == "DTYPE" and value not in _DTYPES:
        raise SettingError(f"DTYPE must be one of {', '.join(sorted(_DTYPES))} (got {value!r})")
    elif setting == "PORT":
        if not value.isdecimal() or not 0 < int(value) < 65536:
            raise SettingError(f"PORT must be a TCP port number (got {value!r})")
    elif setting == "GPUS":
        parse_gpus(value)
    elif setting == "CPUS":
        if not _CPUS.match(value):
            raise SettingError(f"CPUS must be a CPU list like 1 or 1-15 or 0,2-3 (got {value!r})")
    elif not _TOKEN.match(value):
        raise SettingError(f"{setting} must be one word without spaces or quotes (got {value!r})")
