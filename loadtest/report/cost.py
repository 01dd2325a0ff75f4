"""What a million output tokens cost: dollars from a GPU-hour price the user gives, and energy.

    rig report results/ --gpu-hour-price 2.50          # every GPU at $2.50 an hour
    rig report results/ --gpu-prices prices.yaml       # a price per GPU name

A prices file is YAML (a mapping, `NVIDIA H200: 3.80`) or CSV (columns `gpu,usd_per_hour`). A
GPU takes the price of the longest name in the file that its name (as NVML gives it in
`gpu_names`, "NVIDIA H100 80GB HBM3") equals or contains as whole words, case aside: `H100`
prices every H100, `NVIDIA H100 80GB HBM3` only that one. The rig ships no prices.

Per run: dollars per million output tokens = (the GPU-hour prices of its GPUs added) / (its
output tok/s x 3600) x 10^6, the GPUs' cost for the time they took at that run's load; kWh per
million output tokens = gpu_j_per_output_token x 10^6 / 3.6 x 10^6 = J per token / 3.6.
Standard library and PyYAML only: the option is checked before pandas loads.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from loadtest.toolkit.types import BadValue, existing_file

__all__ = ["GpuPrices", "gpu_prices_file", "kwh_per_m_tokens", "usd_per_m_tokens"]

_SECONDS_PER_HOUR = 3600
_J_PER_KWH = 3.6e6
_MILLION = 1e6


@dataclass(frozen=True)
class GpuPrices:
    """Dollars per GPU-hour: one price for every GPU (`flat`), or by GPU name (`by_name`)."""
    flat: float | None = None
    by_name: dict[str, float] = field(default_factory=dict)
    source: str = ""  # what the report says the prices came from

    def hourly(self, names: list[str], count: int) -> tuple[float | None, str]:
        """The dollars an hour of `count` GPUs named `names` (NVML's names; may be empty), or
        None and why not."""
        if self.flat is not None:
            return self.flat * count, ""
        if len(names) != count:
            return None, "no GPU names to price (no GPU telemetry)"
        total = 0.0
        for name in names:
            price = self._price_of(name)
            if price is None:
                return None, f"no price for {name} in {self.source}"
            total += price
        return total, ""

    def _price_of(self, name: str) -> float | None:
        matches = [key for key in self.by_name
                   if re.search(rf"(?<!\w){re.escape(key.lower())}(?!\w)", name.lower())]
        return self.by_name[max(matches, key=len)] if matches else None


def usd_per_m_tokens(hourly_usd: float, output_tok_per_s: float) -> float:
    """Dollars per million output tokens of GPUs costing `hourly_usd` an hour at that rate."""
    if not output_tok_per_s > 0:
        return math.nan
    return hourly_usd / (output_tok_per_s * _SECONDS_PER_HOUR) * _MILLION


def kwh_per_m_tokens(j_per_output_token: float) -> float:
    return j_per_output_token * _MILLION / _J_PER_KWH


def gpu_prices_file(text: object) -> GpuPrices:
    """--gpu-prices: the prices in a YAML or CSV file; BadValue, in one line, for a file that
    is not one, or a price that is not a finite number above 0."""
    path = existing_file(text)
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise BadValue(f"{str(text)!r} is not readable UTF-8 text") from None
    pairs = _csv_pairs(content) if path.suffix.lower() == ".csv" else _yaml_pairs(content, path)
    if not pairs:
        raise BadValue(f"{str(text)!r} names no GPU: write `GPU NAME: DOLLARS_PER_HOUR` lines "
                       "(YAML) or `gpu,usd_per_hour` rows (CSV)")
    prices = {}
    for name, price in pairs:
        if not name.strip():
            raise BadValue(f"{str(text)!r} has a price without a GPU name")
        prices[name.strip()] = _price(price, name, text)
    return GpuPrices(by_name=prices, source=str(path))


def _yaml_pairs(content: str, path: Path) -> list[tuple[str, object]]:
    import yaml  # only for a prices file

    try:
        data = yaml.safe_load(content)
    except yaml.YAMLError:
        raise BadValue(f"{str(path)!r} is not YAML (or name it .csv)") from None
    if not isinstance(data, dict):
        raise BadValue(f"{str(path)!r} must map GPU names to dollars per hour "
                       "(`NVIDIA H200: 3.80`)")
    return [(str(name), price) for name, price in data.items()]


def _csv_pairs(content: str) -> list[tuple[str, object]]:
    rows = list(csv.reader(io.StringIO(content)))
    if not rows or [c.strip() for c in rows[0]] != ["gpu", "usd_per_hour"]:
        raise BadValue("a prices CSV must have the header gpu,usd_per_hour")
    pairs = []
    for number, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != 2:
            raise BadValue(f"prices CSV line {number}: write GPU NAME,DOLLARS_PER_HOUR")
        pairs.append((row[0], row[1]))
    return pairs


def _price(value: object, name: str, text: object) -> float:
    try:
        price = float(str(value).strip()) if not isinstance(value, bool) else math.nan
    except ValueError:
        price = math.nan
    if not (math.isfinite(price) and price > 0):
        raise BadValue(f"{str(text)!r}: the price of {name.strip()!r} must be dollars per hour "
                       f"above 0, got {str(value)!r}")
    return price
