"""Sweeps race several workloads: `workloads:` in a matrix (loadtest/sweep/matrix.py), each
cell's workload options on its Locust command line, its hash known before any engine starts.
Fast: matrices are parsed and planned, nothing is started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from loadtest.sweep.cells import expand_cells
from loadtest.sweep.matrix import MatrixError, load_matrix, parse_matrix
from loadtest.launch import command
from loadtest.sweep.measure import cell_spec
from loadtest.sweep.runner import workload_sha256
from rig_helpers import REPO

SWEEP = REPO / "sweeps" / "workloads.yaml"


def matrix(**top: Any) -> dict[str, Any]:
    return {"name": "w", "users": [8], "engines": [{"engine": "vllm-cpu", "launch": "local"}], **top}


def test_the_workloads_sweep_races_three_engines_on_four_workloads_at_8_and_32_users():
    m = load_matrix(SWEEP, gpu_count=None)
    assert {c.engine for c in m.configs} == {"vllm-cpu", "llamacpp-cpu", "transformers"}
    assert [w.label for w in m.workloads] == ["decode", "prefill", "prefix", "chat4"]
    assert m.users == (8, 32)
    source = {w.label: dict(w.source) for w in m.workloads}
    assert source["decode"]["input_len"] == "128" and source["decode"]["output_len"] == "256"
    assert source["prefill"]["input_len"] == "2048" and source["prefill"]["output_len"] == "32"
    assert source["prefix"]["prefix_len"] == "1500" and source["prefix"]["prefix_groups"] == "8"
    assert source["chat4"]["turns"] == "4" and source["chat4"]["source"] == "conversation"
    plan = expand_cells(m, {(w.label, u): workload_sha256(m, u, w)
                            for w in m.workloads for u in m.users})
    names = [cell.name for _, _, cells in plan for cell in cells]
    assert len(names) == 3 * 4 * 2 and "prefill-u32-r1" in names
    assert len({cell.cell_id for _, _, cells in plan for cell in cells}) == len(names)


def test_a_cells_command_carries_its_workload_options():
    m = load_matrix(SWEEP, gpu_count=None)
    prefix = next(w for w in m.workloads if w.label == "prefix")
    cmd = command(cell_spec(engine="vllm-cpu", url="http://127.0.0.1:1", users=8, workload=prefix,
                            out=Path("out"), repeat=1, tag="w", flags="", gpu=""))
    assert {("--workload", "prefix"), ("--prefix-len", "1500"), ("--prefix-groups", "8"),
            ("--input-len", "64"), ("--output-len", "64")} <= set(zip(cmd, cmd[1:]))


def test_a_matrix_without_workloads_keeps_its_cell_ids():
    plain = parse_matrix(matrix(workload={"prompts": "mixed", "requests": 16}), 0)
    assert plain.workloads == () and plain.workload.source == ()
    cells = expand_cells(plain, "sha")[0][2]
    assert [c.name for c in cells] == ["u8-r1"] and cells[0].workload is None


def test_one_workload_may_name_its_source_too():
    m = parse_matrix(matrix(workload={"source": "synthetic", "input_len": "64-128", "requests": 8}), 0)
    assert dict(m.workload.source) == {"source": "synthetic", "input_len": "64-128"}
    assert "synthetic" in m.workload.describe()


@pytest.mark.parametrize("top, message", [
    ({"workload": {"source": "nope"}}, "--workload 'nope'"),
    ({"workload": {"source": "synthetic", "input_len": "5-1"}}, "--input-len"),
    ({"workload": {"source": "trace", "trace": "/nonexistent.jsonl"}}, "cannot read"),
    ({"workload": {"bogus_option": 1}}, "unknown key 'bogus_option'"),
    ({"workloads": {"a b": {"source": "synthetic"}}}, "a name is letters"),
    ({"workloads": ["x"]}, "workloads must map NAME"),
    ({"workloads": {"x": {"source": "trace", "trace": "t.jsonl", "speedup": "0"}}}, "--speedup"),
])
def test_a_bad_workload_in_a_matrix_is_one_line(top: dict, message: str):
    with pytest.raises(MatrixError, match=message) as caught:
        parse_matrix(matrix(**top), 0)
    assert "\n" not in str(caught.value)


def test_the_sweep_file_is_valid_yaml_with_its_comment_header():
    text = SWEEP.read_text()
    assert text.startswith("#") and isinstance(yaml.safe_load(text), dict)
