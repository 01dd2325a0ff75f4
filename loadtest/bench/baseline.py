"""The measurer's own cost against a baseline: the rig of another revision, and the cost table.

`rig bench --pacer --baseline REV` runs three clients each round against the pacing server: the
lean reference, this tree's rig, and the rig of REV (a git revision, checked out into a
temporary worktree, or the path of a checkout). `cost_table` prints, per user count and rig,
the paired ratios against the reference with their spread; `against_baseline` compares this
tree's rig with REV's round by round and says whether the change fell behind it.

A change falls behind when the 90% interval of its paired comparison with the baseline lies
wholly past a margin on the worse side (MARGINS: tok/s or occupancy more than 1% lower, TTFT p50
more than 2 ms higher, the client's CPU per request more than 5% higher), judged from MIN_ROUNDS
rounds on. CPU per request (client_cpu_mean_pct x completion_time_s / completed) is the least
moved by a noisy machine: it counts the client's work, not when it got a core. One machine's noise widens the
intervals (more rounds narrow them); no speed is asserted anywhere else.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

__all__ = ["BASELINE", "MARGINS", "MIN_ROUNDS", "BaselineError", "against_baseline",
           "baseline_tree", "cost_table", "cpu_per_request", "interval", "locustfile_in"]

BASELINE = "rig-baseline"  # bench.csv's client name for the rig of --baseline
MARGINS = {"tok_s": 0.01, "ttft_ms": 2.0, "occupancy": 0.01, "cpu": 0.05}
MIN_ROUNDS = 3


class BaselineError(RuntimeError):
    """One line for the user."""


@contextmanager
def baseline_tree(repo: Path, revision: str) -> Iterator[tuple[Path, str]]:
    """(checkout, its name): `revision` as a folder holding loadtest/engines.py, or a git
    revision checked out into a temporary worktree of `repo`, removed on the way out."""
    folder = Path(revision).expanduser()
    if folder.is_dir():
        if not locustfile_in(folder).is_file():
            raise BaselineError(f"--baseline {revision}: no loadtest/engines.py in that folder")
        yield folder.resolve(), str(folder)
        return
    found = _git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    if found.returncode != 0:
        raise BaselineError(f"--baseline {revision!r} is neither a folder nor a git revision of "
                            f"{repo}")
    commit = found.stdout.strip()
    parent = Path(tempfile.mkdtemp(prefix="rig-baseline-"))
    tree = parent / commit[:12]
    added = _git(repo, "worktree", "add", "--detach", str(tree), commit)
    if added.returncode != 0:
        shutil.rmtree(parent, ignore_errors=True)
        raise BaselineError(f"cannot check out {revision} into a worktree: "
                            f"{(added.stderr.strip().splitlines() or ['no output'])[-1]}")
    try:
        yield tree, f"{revision} ({commit[:9]})" if not commit.startswith(revision) else commit[:9]
    finally:
        _git(repo, "worktree", "remove", "--force", str(tree))
        shutil.rmtree(parent, ignore_errors=True)


def locustfile_in(tree: Path) -> Path:
    return tree / "loadtest" / "engines.py"


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          timeout=300)


def interval(values: Sequence[float], center: Callable = np.median) -> tuple[float, float]:
    """A bootstrap 90% interval of the center of `values` (seeded: the same values print the
    same interval)."""
    resampled = np.random.default_rng(0).choice(values, size=(10_000, len(values)))
    low, high = np.percentile(center(resampled, axis=1), [5, 95])
    return float(low), float(high)


def _paired(a: list[dict], b: list[dict]) -> dict[str, list[float]]:
    """Per round, a against b: tok/s ratio, TTFT p50 difference (ms), occupancy ratio, ratio of
    the client's CPU seconds per request."""
    pairs = list(zip(a, b))
    return {"tok_s": [x["output_tok_per_s"] / y["output_tok_per_s"] for x, y in pairs],
            "ttft_ms": [x["ttft_p50_ms"] - y["ttft_p50_ms"] for x, y in pairs],
            "occupancy": [x["occupancy"] / y["occupancy"] for x, y in pairs
                          if x.get("occupancy") and y.get("occupancy")],
            "cpu": [cpu_per_request(x) / cpu_per_request(y) for x, y in pairs
                    if cpu_per_request(x) and cpu_per_request(y)]}


def cpu_per_request(run: dict) -> float:
    """The client's CPU seconds per completed request (0.0 where a figure is missing)."""
    try:
        value = run["client_cpu_mean_pct"] / 100 * run["completion_time_s"] / run["completed"]
    except (KeyError, TypeError, ZeroDivisionError):
        return 0.0
    return value if value == value else 0.0


def _cell(values: list[float], ratio: bool) -> str:
    if not values or any(v != v for v in values):  # none, or nan (a column an older file lacks)
        return "-"
    low, high = interval(values)
    if ratio:
        return f"{statistics.median(values):.3f} ({low:.3f}-{high:.3f})"
    return f"{statistics.median(values):+.1f} ({low:+.1f} to {high:+.1f})"


_HEAD = ("users", "client", "rounds", "tok/s ratio (90% int.)", "TTFT p50 diff ms (90% int.)",
         "occupancy ratio (90% int.)", "CPU/request ratio (90% int.)")


def cost_table(pooled: dict[int, dict[str, list[dict]]], names: dict[str, str]) -> str:
    """One row per user count and rig (names: bench.csv client -> label, in order): each
    against the reference of its round, as medians of the paired rounds with their bootstrap
    90% intervals."""
    lines = [_HEAD]
    for users, runs in sorted(pooled.items()):
        for client, label in names.items():
            if client not in runs:
                continue
            paired = _paired(runs[client], runs["reference"])
            lines.append((str(users), label, str(len(paired["tok_s"])),
                          _cell(paired["tok_s"], True), _cell(paired["ttft_ms"], False),
                          _cell(paired["occupancy"], True), _cell(paired["cpu"], True)))
    return _aligned(lines)


def against_baseline(runs: dict[str, list[dict]], label: str) -> tuple[str, bool]:
    """This tree's rig against the baseline's, round by round: one line, and whether it fell
    behind (a 90% interval wholly on the worse side of no difference)."""
    paired = _paired(runs["rig"], runs[BASELINE])
    worse = []
    for key, name, bad in (
            ("tok_s", "tok/s", lambda low, high: high < 1.0 - MARGINS["tok_s"]),
            ("ttft_ms", "TTFT p50", lambda low, high: low > MARGINS["ttft_ms"]),
            ("occupancy", "occupancy", lambda low, high: high < 1.0 - MARGINS["occupancy"]),
            ("cpu", "CPU per request", lambda low, high: low > 1.0 + MARGINS["cpu"])):
        if paired[key] and not any(v != v for v in paired[key]) and bad(*interval(paired[key])):
            worse.append(name)
    line = (f"rig against {label}: tok/s {_cell(paired['tok_s'], True)}, TTFT p50 "
            f"{_cell(paired['ttft_ms'], False)} ms, occupancy {_cell(paired['occupancy'], True)}, "
            f"CPU per request {_cell(paired['cpu'], True)}: ")
    if len(paired["tok_s"]) < MIN_ROUNDS:
        return line + f"too few rounds to judge ({MIN_ROUNDS} at least)", True
    return line + (f"BEHIND ({', '.join(worse)})" if worse else "not behind"), not worse


def _aligned(lines: list[tuple[str, ...]]) -> str:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = ["  ".join(cell.ljust(w) if i == 1 else cell.rjust(w)
                     for i, (cell, w) in enumerate(zip(line, widths))).rstrip() for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)
