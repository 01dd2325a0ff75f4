"""The reconcile table: one row per metric, the rig's value, each definition's value (and each
peer's own reported figure where one was read), and the cause of each difference in words."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from loadtest.reconcile.figures import METRICS, Figure

__all__ = ["Row", "build_rows", "render"]

_SAME_WITHIN = 5e-4  # relative: closer than this is the same figure (float noise, rounding)


@dataclass
class Row:
    key: str
    label: str
    rig: float | None
    values: dict[str, float | None] = field(default_factory=dict)  # column -> value
    cause: str = ""


def build_rows(rig: Mapping[str, Figure], peers: Mapping[str, Mapping[str, Figure]],
               reported: Mapping[str, Mapping[str, float]] | None = None) -> list[Row]:
    """`peers`: definition name -> its recomputed figures; `reported`: column name (e.g.
    "vllm (own)") -> figures a peer printed itself on the same workload."""
    rows = []
    for key, label in METRICS:
        base = rig[key].value if key in rig else None
        row = Row(key, label, base)
        causes = []
        for name, figures in peers.items():
            figure = figures.get(key)
            row.values[name] = figure.value if figure else None
            own = (reported or {}).get(f"{name} (own)", {}).get(key)
            if figure and figure.how and (_differs(base, figure.value) or _differs(base, own)):
                causes.append(f"{name}: {figure.how}")
        for column, figures in (reported or {}).items():
            row.values[column] = figures.get(key)
        row.cause = "; ".join(causes)
        rows.append(row)
    return [r for r in rows if r.rig is not None or any(v is not None for v in r.values.values())]


def _differs(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return False
    return not math.isclose(a, b, rel_tol=_SAME_WITHIN, abs_tol=1e-9)


def render(rows: Sequence[Row], form: str, sources: Mapping[str, str]) -> str:
    columns = list(rows[0].values) if rows else []
    if form == "json":
        return json.dumps({"sources": dict(sources),
                           "rows": [{"metric": r.key, "rig": r.rig, **r.values, "cause": r.cause}
                                    for r in rows]}, indent=2) + "\n"
    if form == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["metric", "rig", *columns, "cause"])
        for r in rows:
            writer.writerow([r.key, _plain(r.rig), *(_plain(r.values[c]) for c in columns),
                             r.cause])
        return buffer.getvalue()
    return _text(rows, columns, sources)


def _plain(value: float | None) -> str:
    return "" if value is None else repr(float(value))


_COUNTS = ("completed", "failed", "output_tokens")


def _shown(value: float | None, key: str = "") -> str:
    if value is None:
        return "-"
    if key in _COUNTS and float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.2f}"


def _text(rows: Sequence[Row], columns: list[str], sources: Mapping[str, str]) -> str:
    header = ["metric", "rig", *columns]
    cells = [[r.label, _shown(r.rig, r.key), *(_shown(r.values[c], r.key) for c in columns)]
             for r in rows]
    widths = [max(len(line[i]) for line in [header, *cells]) for i in range(len(header))]

    def line(values: list[str]) -> str:
        return "  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                         for i, (v, w) in enumerate(zip(values, widths)))

    out = [line(header), line(["-" * w for w in widths])]
    notes: dict[str, int] = {}  # a cause shared by several rows (mean, p50, p99) is noted once
    for row, values in zip(rows, cells):
        mark = ""
        if row.cause:
            number = notes.setdefault(row.cause, len(notes) + 1)
            mark = f"  [{number}]"
        out.append(line(values) + mark)
    out.append("")
    out += [f"[{number}] {note}" for note, number in notes.items()]
    out.append("")
    out += [f"{name}: {source}" for name, source in sources.items()]
    return "\n".join(out) + "\n"
