"""LoRA adapter mixes: one base model serving many adapters, each request naming one.

    --lora-adapters 16               lora0..lora15 (servers/lora.py's names), or NAME,NAME,...
    --lora-mix uniform | zipf:S      how requests spread over them (default uniform); zipf: the
                                     k-th adapter's share is proportional to 1 / k^S

An engine picks the adapter by the request's model name (vLLM's `--lora-modules NAME=PATH`) or
by its id in the request's `lora` field (llama.cpp: `[{"id": I, "scale": 1.0}]`, I the adapter's
place in --lora-adapters, which must be the order of the server's `--lora` flags), so the mix
rewrites each request after the source built it: any single-turn source (a prompt set, synthetic
lengths, a dataset, shared prefixes, a trace) can be spread over adapters. Both engines get the
same mix and the same workload hash, so they race on it.
The choice is seeded (--seed), so the same options send the same adapter to each request; the
workload's hash covers it. Per adapter, run.json gets the figures (requests, failures, output
tok/s over the run's completion time, TTFT p50 and p99 from the actual send), read back from the
bodies that were sent: the model or id named there is the one fact of which adapter a request
used.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where it is used, so the run's options register without numpy
    import numpy as np

from loadtest.results.groups import group_figures
from loadtest.results.record import RequestRecord
from loadtest.workload.spec import LazySequence, RequestSpec, Workload, WorkloadError

__all__ = ["AdapterMix", "LORA_FLAGS", "add_lora_options", "adapter_figures", "lora_mix",
           "mixed_sha256", "with_adapters"]

LORA_FLAGS = {"lora_adapters": "--lora-adapters", "lora_mix": "--lora-mix"}
MAX_ADAPTERS = 256
MAX_ZIPF = 10.0
_STREAM = 7_001  # the seeded stream adapters are drawn from (Context.rng's other streams differ)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")


@dataclass(frozen=True)
class AdapterMix:
    names: tuple[str, ...]
    zipf_s: float | None = None  # None: uniform

    @property
    def text(self) -> str:
        return "uniform" if self.zipf_s is None else f"zipf:{self.zipf_s:g}"

    def shares(self) -> np.ndarray:
        """Each adapter's probability, in the order named."""
        import numpy as np
        weights = (np.ones(len(self.names)) if self.zipf_s is None
                   else 1 / np.arange(1, len(self.names) + 1) ** self.zipf_s)
        return weights / weights.sum()

    def assign(self, count: int, seed: int) -> list[str]:
        """The adapter of each of `count` requests, the same for the same seed."""
        import numpy as np
        rng = np.random.default_rng([seed, _STREAM])
        picks = rng.choice(len(self.names), size=count, p=self.shares())
        return [self.names[i] for i in picks]


def add_lora_options(group: Any) -> None:
    group.add_argument("--lora-adapters", default="", help="spread requests over LoRA adapters "
                       "by model name: N (lora0..lora{N-1}, as servers/lora.py builds them) or "
                       "NAME,...")
    group.add_argument("--lora-mix", default="", help="uniform (default) or zipf:S (the k-th "
                       "adapter's share proportional to 1/k^S)")


def lora_mix(adapters: str, mix: str) -> AdapterMix | None:
    """The checked mix; None without --lora-adapters. WorkloadError (one line) otherwise."""
    adapters, mix = adapters.strip(), mix.strip()
    if not adapters:
        if mix:
            raise WorkloadError("--lora-mix goes with --lora-adapters: name the adapters")
        return None
    return AdapterMix(_names(adapters), _zipf(mix))


def _names(text: str) -> tuple[str, ...]:
    if text.isdecimal():
        if not 1 <= int(text) <= MAX_ADAPTERS:
            raise WorkloadError(f"--lora-adapters must be 1 to {MAX_ADAPTERS} adapters, "
                                f"got {text!r}")
        return tuple(f"lora{i}" for i in range(int(text)))
    names = tuple(part.strip() for part in text.split(","))
    bad = next((n for n in names if not _NAME.match(n)), None)
    if bad is not None:
        raise WorkloadError(f"--lora-adapters takes N or model names (letters, digits, . _ : / -) "
                            f"joined with commas, got {bad!r}")
    if len(set(names)) < len(names) or len(names) > MAX_ADAPTERS:
        raise WorkloadError(f"--lora-adapters names each adapter once, at most {MAX_ADAPTERS}")
    return names


def _zipf(text: str) -> float | None:
    if text in ("", "uniform"):
        return None
    kind, _, value = text.partition(":")
    try:
        s = float(value)
    except ValueError:
        s = math.nan
    if kind != "zipf" or not 0 < s <= MAX_ZIPF:
        raise WorkloadError(f"--lora-mix takes uniform or zipf:S with S above 0 and at most "
                            f"{MAX_ZIPF:g}, got {text!r}")
    return s


def mixed_sha256(sha256: str, mix: AdapterMix | None, seed: int) -> str:
    """The workload's hash with the mix in it (unchanged without one)."""
    if mix is None:
        return sha256
    described = json.dumps({"workload": sha256, "adapters": mix.names, "mix": mix.text,
                            "seed": seed}, sort_keys=True)
    return hashlib.sha256(described.encode()).hexdigest()


def _adapted(body: bytes, model: str, mix: AdapterMix, lora_as: str) -> bytes:
    """The body sent to the adapter `model`: by its name, or by its id in llama.cpp's field."""
    fields = json.loads(body)
    if "model" not in fields:
        raise WorkloadError("--lora-adapters picks the adapter by the request's model name; "
                            "this API's requests carry none (use an OpenAI-style --api)")
    if lora_as == "lora":
        fields["lora"] = [{"id": mix.names.index(model), "scale": 1.0}]
    else:
        fields["model"] = model
    return json.dumps(fields).encode()


class _AdapterSpecs(LazySequence[RequestSpec]):
    """A lazy source's specs (a trace), each sent to its adapter when taken."""

    def __init__(self, specs: Sequence[RequestSpec], models: list[str], mix: AdapterMix,
                 lora_as: str) -> None:
        self._specs, self._models, self._mix, self._lora_as = specs, models, mix, lora_as
        self.asked = getattr(specs, "asked", None)
        self.output_asked = getattr(specs, "output_asked", None)

    def __len__(self) -> int:
        return len(self._specs)

    def _at(self, index: int) -> RequestSpec:
        spec = self._specs[index]
        return replace(spec, body=_adapted(spec.body, self._models[index], self._mix, self._lora_as))


def with_adapters(workload: Workload, mix: AdapterMix | None, seed: int,
                  lora_as: str = "model") -> Workload:
    """The workload with each request sent to its adapter (by model name, or by id in
    llama.cpp's `lora` field: `lora_as`); as it was without a mix."""
    if mix is None:
        return workload
    if workload.sessions:
        raise WorkloadError("--lora-adapters spreads single requests; conversations keep one "
                            "model per session (not done)")
    models = mix.assign(len(workload.specs), seed)
    if isinstance(workload.specs, list):
        specs: Sequence[RequestSpec] = [replace(s, body=_adapted(s.body, m, mix, lora_as))
                                        for s, m in zip(workload.specs, models)]
    else:
        _adapted(workload.specs[0].body, models[0], mix, lora_as)  # refused now, not while sending
        specs = _AdapterSpecs(workload.specs, models, mix, lora_as)
    tag = f"lora{len(mix.names)}" + ("" if mix.zipf_s is None else f"z{mix.zipf_s:g}")
    return replace(workload, name=f"{workload.name}-{tag}", specs=specs, adapters=mix.names,
                   sha256=mixed_sha256(workload.sha256, mix, seed),
                   columns={**workload.columns, "lora_adapters": len(mix.names),
                            "lora_mix": mix.text})


def _adapter_of(spec: RequestSpec, names: Sequence[str]) -> str:
    """The adapter a sent body names: its `lora` id's name, else its model."""
    fields = json.loads(spec.body)
    chosen = fields.get("lora")
    if chosen:
        return names[chosen[0]["id"]]
    return str(fields.get("model", ""))


def adapter_figures(workload: Workload, records: Sequence[RequestRecord],
                    completion_time_s: float | None) -> dict[str, dict[str, Any]]:
    """Per adapter (loadtest/results/groups.py's figures), {} without a mix."""
    if "lora_adapters" not in workload.columns or not workload.specs:
        return {}
    count = len(workload.specs)
    return group_figures(
        records, lambda r: _adapter_of(workload.specs[r.request_id % count], workload.adapters),
        completion_time_s)
