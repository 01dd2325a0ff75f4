"""The runs.csv schema (loadtest/results/schema.py) is the one description of a row: every row the
rig writes holds only its columns, in its order, each cell of its type, and the docs' table of
columns is generated from it."""

from __future__ import annotations

import csv
import math
import re
import sys
from pathlib import Path

import pytest

from loadtest.results.goodput import goodput, parse_slo
from loadtest.results.record import RequestRecord
from loadtest.results.rules import REASONS
from loadtest.results.recount import recount
from loadtest.results.docs import block, found
from loadtest.results.schema import BY_NAME, COLUMN_NAMES, COLUMNS
from loadtest.results.summary import summarize

sys.path.insert(0, str(Path(__file__).parent))
from fake_tgi import FakeTGI  # noqa: E402
from rig_helpers import run_locust  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MS = 1_000_000


def test_the_docs_table_is_the_schemas():
    text = (REPO / "docs" / "measurement.md").read_text(encoding="utf-8")
    assert found(text, "columns") == block("columns"), (
        "docs/measurement.md's columns table differs from loadtest/results/schema.py: "
        "run python -m loadtest.results.docs --write docs/measurement.md")


def test_the_readme_names_only_columns_of_the_schema():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("A `runs.csv` row, among its columns")
    listed = text[start:text.index("\n\n", text.index("- **whether to trust it**", start))]
    named = {name for name in re.findall(r"`([a-z][a-z0-9_]*)`", listed)}
    codes = {c for c in named if c not in BY_NAME} - set(REASONS) - {"valid", "invalid"}
    assert "engine" in named and codes == set(), f"README names columns the schema lacks: {codes}"


def test_each_column_is_named_once_with_a_type_and_one_line_of_meaning():
    assert len(set(COLUMN_NAMES)) == len(COLUMNS)
    for column in COLUMNS:
        assert column.type in (str, int, float, bool), column
        assert column.meaning and "\n" not in column.meaning and "|" not in column.meaning, column


def _cell_fits(cell: str, kind: type) -> bool:
    if cell == "" or kind is str:
        return True
    if kind is bool:
        return cell in ("True", "False")
    try:
        value = float(cell)
    except ValueError:
        return False
    return math.isfinite(value) and (kind is float or value == int(value))


def _assert_rows_fit_the_schema(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file)
        header = list(reader.fieldnames or [])
        rows = list(reader)
    unknown = [name for name in header if name not in BY_NAME]
    assert not unknown, f"columns the schema does not describe: {unknown}"
    assert header == [name for name in COLUMN_NAMES if name in header], "not in the schema's order"
    for row in rows:
        wrong = {k: v for k, v in row.items() if not _cell_fits(v, BY_NAME[k].type)}
        assert not wrong, f"cells not of their column's type: {wrong}"
    return rows


def test_every_row_a_real_run_writes_fits_the_schema(tmp_path: Path):
    """Two real runs of the locustfile against an in-test TGI server (no engine): closed loop
    with latency targets, then open loop."""
    with FakeTGI(prefill_s=0.0, token_s=0.001) as tgi:
        for extra in (["--users", "2", "--slo", "ttft_ms=500"],
                      ["--users", "4", "--rate", "50"]):
            result = run_locust("--engine", "tgi", "--host", tgi.url, "--requests", "8",
                                "--max-tokens", "4", "--out", str(tmp_path), *extra)
            assert result.returncode == 0, result.stderr[-2000:]
    rows = _assert_rows_fit_the_schema(tmp_path / "runs.csv")
    assert len(rows) == 2
    assert rows[0]["slo"] and rows[1]["rate"] == "50"


def _records() -> list[RequestRecord]:
    records = []
    for i in range(4):
        sent = i * 10 * MS
        record = RequestRecord(i, "p", 0.0, sent, first_chunk_ns=sent + 5 * MS,
                               done_ns=sent + 9 * MS, chunk_gaps_ns=[2 * MS, 2 * MS],
                               output_chunks=3, output_tokens=3, output_tokens_source="usage")
        record.scheduled_ns = sent
        records.append(record)
    return records


def _turns() -> list[RequestRecord]:
    records = _records()
    for i, record in enumerate(records):
        record.scheduled_ns = None
        record.session_id, record.turn = i // 2, i % 2 + 1
        record.session_end = "complete" if record.turn == 2 else None
    return records


@pytest.mark.parametrize("part", ["summary", "goodput", "recount", "schedule", "sessions"])
def test_the_columns_each_part_of_the_rig_adds_are_in_the_schema(part: str):
    records = _records()
    columns = {
        "summary": lambda: summarize([RequestRecord(0, "p", 0.0, 0)]),
        "goodput": lambda: goodput(records, 1.0, parse_slo("ttft_ms=500,e2e_p99_ms=900")),
        "recount": lambda: recount(records, None, False),
        "schedule": lambda: summarize(records),
        "sessions": lambda: summarize(_turns()),
    }[part]()
    assert set(columns) - set(BY_NAME) == set()

