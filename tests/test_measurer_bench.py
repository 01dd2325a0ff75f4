"""The measurer's benchmark (`rig bench --pacer --baseline REV`): the shape of what it prints
and its refusals, from made-up rounds. No test here times anything: the runs themselves take
minutes, and their numbers depend on the machine (evidence/2026-11-26/measurer-cost/)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from loadtest.bench import client
from loadtest.bench.baseline import BASELINE, MIN_ROUNDS, against_baseline, cost_table

_COLUMNS = ("output_tok_per_s", "ttft_p50_ms", "occupancy", "client_cpu_mean_pct",
            "completion_time_s", "completed")


def _run(tok_s: float, ttft_ms: float, occupancy: float, cpu_pct: float) -> dict:
    return dict(zip(_COLUMNS, (tok_s, ttft_ms, occupancy, cpu_pct, 7.0, 1280)))


def _rounds(n: int, tok_s: float, ttft_ms: float, occupancy: float,
            cpu_pct: float = 50.0) -> list[dict]:
    """n rounds around the given values (a little spread, as a machine gives)."""
    return [_run(tok_s * (1 + 0.001 * k), ttft_ms + 0.1 * k, occupancy, cpu_pct)
            for k in range(n)]


def _pooled(rig_ttft_ms: float = 61.0, rounds: int = 4,
            rig_cpu_pct: float = 55.0) -> dict[int, dict[str, list[dict]]]:
    return {users: {"reference": _rounds(rounds, 1000.0 * users, 55.0, 0.99),
                    "rig": _rounds(rounds, 990.0 * users, rig_ttft_ms, 0.98, rig_cpu_pct),
                    BASELINE: _rounds(rounds, 995.0 * users, 60.0, 0.985, 55.0)}
            for users in (64, 256, 512)}


def test_the_cost_table_has_a_row_per_user_count_and_rig_with_its_spread():
    table = cost_table(_pooled(), {"rig": "rig", BASELINE: "rig of v1"}).splitlines()
    assert table[0].split()[:3] == ["users", "client", "rounds"]
    assert "tok/s ratio (90% int.)" in table[0] and "TTFT p50 diff ms (90% int.)" in table[0]
    assert "occupancy ratio (90% int.)" in table[0] and "CPU/request ratio (90% int.)" in table[0]
    assert set(table[1]) <= {"-", " "}
    rows = [re.split(r"\s{2,}", line.strip()) for line in table[2:]]
    assert [r[:3] for r in rows] == [[u, name, "4"] for u in ("64", "256", "512")
                                     for name in ("rig", "rig of v1")]
    assert all(len(r) == 7 for r in rows)
    tok_s, ttft, occupancy, cpu = rows[0][3:]
    assert re.fullmatch(r"0\.990 \(0\.\d{3}-0\.\d{3}\)", tok_s)
    assert re.fullmatch(r"\+6\.\d \(\+6\.\d to \+6\.\d\)", ttft)
    assert re.fullmatch(r"0\.990 \(0\.990-0\.990\)", occupancy)
    assert re.fullmatch(r"1\.100 \(1\.100-1\.100\)", cpu)


def test_a_rig_clearly_slower_than_its_baseline_is_behind_and_an_equal_one_is_not():
    runs = _pooled(rig_ttft_ms=70.0)[256]
    line, ok = against_baseline(runs, "rig of v1")
    assert not ok and line.startswith("rig against rig of v1: tok/s ") and "BEHIND (TTFT p50)" in line
    runs["rig"] = [dict(r) for r in runs[BASELINE]]
    line, ok = against_baseline(runs, "rig of v1")
    assert ok and line.endswith("not behind") and "CPU per request 1.000 (" in line
    line, ok = against_baseline(_pooled(rig_ttft_ms=60.0, rig_cpu_pct=60.0)[64], "rig of v1")
    assert not ok and line.endswith("BEHIND (CPU per request)")


def test_too_few_rounds_are_not_judged():
    runs = _pooled(rig_ttft_ms=90.0, rounds=MIN_ROUNDS - 1)[64]
    line, ok = against_baseline(runs, "rig of v1")
    assert ok and line.endswith(f"too few rounds to judge ({MIN_ROUNDS} at least)")


def test_summarize_prints_the_baseline_beside_the_rig(tmp_path: Path, capsys):
    path = tmp_path / "bench.csv"
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=["users", "round", "client", "output_tokens",
                                                  "ttft_mean_ms", "server_ttft_mean_ms",
                                                  "request_s_mean", "verdict", *_COLUMNS])
        writer.writeheader()
        for users, runs in _pooled(rig_ttft_ms=58.0, rounds=MIN_ROUNDS).items():
            for name, rounds in runs.items():
                for number, run in enumerate(rounds, start=1):
                    writer.writerow({"users": users, "round": number, "client": name,
                                     "output_tokens": 128 * 1280, "ttft_mean_ms": run["ttft_p50_ms"],
                                     "server_ttft_mean_ms": "nan", "request_s_mean": 1.3,
                                     "verdict": "valid", **run})
    assert client.main(["--summarize", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("PASS")
    assert "rig - reference TTFT p50 per round:" in out
    assert "the measurer's cost: each rig against the reference of its round" in out
    assert out.count("rig of the baseline") >= 6 and "512 users: rig against rig of" in out


@pytest.mark.parametrize("argv, message", [
    (["--pacer", "--url", "http://127.0.0.1:9"], "--pacer starts its own server"),
    (["--pacer", "--baseline", "HEAD", "--no-reference"], "leave out --no-reference"),
])
def test_contradictory_options_are_one_error_line(argv, message, tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as exit_:
        client.main([*argv, "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error: " in line]
    assert len(errors) == 1 and message in errors[0]


def test_a_baseline_that_is_no_revision_is_refused_before_anything_starts(tmp_path: Path, capsys):
    out = tmp_path / "out"
    assert client.main(["--pacer", "--baseline", "no-such-revision-xyz", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: --baseline 'no-such-revision-xyz' is neither a folder nor a git "
                   f"revision of {client.REPO}"]
    assert not out.exists()
    (tmp_path / "checkout").mkdir()
    assert client.main(["--pacer", "--baseline", str(tmp_path / "checkout"), "--out", str(out)]) == 2
    assert "no loadtest/engines.py in that folder" in capsys.readouterr().err
