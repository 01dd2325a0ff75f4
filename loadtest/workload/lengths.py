"""Token-length distributions and their option grammar (--input-len, --output-len, --turn-len).

    N                    every request N tokens
    LO-HI                uniform whole numbers from LO to HI, both included
    normal:MEAN,SD       normal, rounded, clipped to [1, MEAN + 4 SD]
    normal:MEAN,SD,LO-HI normal, rounded, clipped to [LO, HI]
    hist:FILE            a CSV of `length,weight` rows (a header line is allowed): lengths drawn
                         in proportion to their weights

Draws come from the caller's seeded numpy Generator, so a seed gives the same lengths on every
machine and in every process. `text` is the canonical spelling (it goes into names and hashes);
a histogram's is its file's sha256, so two files of the same rows are the same distribution.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where lengths are drawn: the options import without it
    import numpy as np

from loadtest.workload.spec import WorkloadError

__all__ = ["Lengths", "MAX_LENGTH", "parse_lengths"]

# Past any context an engine takes; refusing it here keeps a typo from building a huge workload.
MAX_LENGTH = 1 << 20
_NUMBER = r"\d{1,9}"
_RANGE = re.compile(rf"({_NUMBER})-({_NUMBER})")
_NORMAL = re.compile(r"normal:([0-9.]+),([0-9.]+)(?:,(\d{1,9})-(\d{1,9}))?")


@dataclass(frozen=True)
class Lengths:
    """A distribution of token lengths; `values` and `weights` hold a histogram's rows."""

    kind: str  # fixed | uniform | normal | hist
    low: int
    high: int
    mean: float = 0.0
    sd: float = 0.0
    values: tuple[int, ...] = ()
    weights: tuple[float, ...] = ()
    text: str = ""  # canonical spelling, for names and hashes
    label: str = ""  # short, for workload names: 128, 64-256, n512s64, hist

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """`count` lengths, each within [low, high]."""
        import numpy as np
        if self.kind == "fixed":
            return np.full(count, self.low, dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(self.low, self.high, size=count, endpoint=True)
        if self.kind == "normal":
            drawn = np.rint(rng.normal(self.mean, self.sd, size=count)).astype(np.int64)
            return np.clip(drawn, self.low, self.high)
        weights = np.asarray(self.weights) / sum(self.weights)
        return rng.choice(np.asarray(self.values, dtype=np.int64), size=count, p=weights)

    @property
    def expected(self) -> float:
        """The mean length asked (before clipping, for normal)."""
        if self.kind == "hist":
            import numpy as np
            return float(np.average(self.values, weights=self.weights))
        return self.mean if self.kind == "normal" else (self.low + self.high) / 2


def parse_lengths(text: str, option: str) -> Lengths:
    """The distribution `text` spells; WorkloadError naming `option` when it spells none."""
    text = str(text).strip()
    if text.isdecimal():  # isdigit() takes "²", which int() refuses
        return _fixed(int(text), option, text)
    if (found := _RANGE.fullmatch(text)) is not None:
        low, high = _bounds(int(found[1]), int(found[2]), option, text)
        return Lengths("uniform", low, high, text=f"{low}-{high}", label=f"{low}-{high}")
    if (found := _NORMAL.fullmatch(text)) is not None:
        return _normal(found, option, text)
    if text.startswith("hist:") and len(text) > 5:
        return _histogram(Path(text[5:]), option)
    raise WorkloadError(f"{option} {text!r}: give N, LO-HI, normal:MEAN,SD[,LO-HI] or hist:FILE "
                        "(token counts)")


def _fixed(length: int, option: str, text: str) -> Lengths:
    _bounds(length, length, option, text)
    return Lengths("fixed", length, length, mean=length, text=str(length), label=str(length))


def _bounds(low: int, high: int, option: str, text: str) -> tuple[int, int]:
    if not 1 <= low <= high <= MAX_LENGTH:
        raise WorkloadError(f"{option} {text!r}: lengths must satisfy 1 <= LO <= HI <= {MAX_LENGTH}")
    return low, high


def _normal(found: re.Match[str], option: str, text: str) -> Lengths:
    try:
        mean, sd = float(found[1]), float(found[2])
    except ValueError:
        raise WorkloadError(f"{option} {text!r}: MEAN and SD must be numbers") from None
    if not (1 <= mean <= MAX_LENGTH and 0 <= sd <= MAX_LENGTH):
        raise WorkloadError(f"{option} {text!r}: MEAN must be 1-{MAX_LENGTH} and SD 0-{MAX_LENGTH}")
    if found[3] is not None:
        low, high = _bounds(int(found[3]), int(found[4]), option, text)
    else:
        low, high = 1, min(MAX_LENGTH, int(mean + 4 * sd) or 1)
    if not low <= mean <= high:
        raise WorkloadError(f"{option} {text!r}: MEAN must lie within LO-HI")
    canonical = f"normal:{mean:g},{sd:g},{low}-{high}"
    return Lengths("normal", low, high, mean=mean, sd=sd, text=canonical,
                   label=f"n{mean:g}s{sd:g}")


def _histogram(path: Path, option: str) -> Lengths:
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except OSError as exc:
        raise WorkloadError(f"{option} hist:{path}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise WorkloadError(f"{option} hist:{path}: not UTF-8 text") from None
    values: list[int] = []
    weights: list[float] = []
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not "".join(row).strip():
            continue
        length, weight = _histogram_row(row, f"{option} hist:{path}:{number}", header=number == 1)
        if length:
            values.append(length)
            weights.append(weight)
    if not values or sum(weights) <= 0:
        raise WorkloadError(f"{option} hist:{path}: no `length,weight` rows with a positive weight")
    sha = hashlib.sha256(data).hexdigest()
    return Lengths("hist", min(values), max(values), values=tuple(values), weights=tuple(weights),
                   text=f"hist:{sha}", label=f"hist{sha[:6]}")


def _histogram_row(row: list[str], where: str, header: bool) -> tuple[int, float]:
    """(length, weight); (0, 0) for a header line."""
    try:
        length, weight = int(row[0]), float(row[1]) if len(row) > 1 else 1.0
    except ValueError:
        if header:
            return 0, 0.0
        raise WorkloadError(f"{where}: a row is `length,weight` (a whole number, a number)") from None
    if len(row) > 2 or not 1 <= length <= MAX_LENGTH or not (weight >= 0 and weight < float("inf")):
        raise WorkloadError(f"{where}: a row is `length,weight` with 1 <= length <= {MAX_LENGTH} "
                            "and weight >= 0")
    return length, weight
