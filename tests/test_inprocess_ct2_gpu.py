"""CTranslate2 on a GPU (loadtest/inprocess/ct2.py's `device` and GPU compute types), what runs
without one: the table's variants, the converter's command and its refusals, and a real worker
refusing `ctranslate2:cuda` in one line on a host without CUDA. The GPU runs are in
evidence/2026-11-28/h200-lease5."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rig_helpers import REPO
from loadtest.inprocess import ct2
from loadtest.inprocess.engines import ENGINES, parse_spec

_TRANSFORMERS_PYTHON = REPO / ".venv-transformers" / "bin" / "python"


def test_the_cuda_variants_load_on_the_gpu_at_a_gpu_precision_and_say_so_in_the_flags():
    for spec, compute_type in (("ctranslate2:cuda", "bfloat16"), ("ctranslate2:cuda-int8", "int8_bfloat16")):
        engine, _, options, flags = parse_spec(spec)
        assert options == {"compute_type": compute_type, "device": "cuda"}
        assert flags == f"--device cuda --compute-type {compute_type}"
        assert compute_type in ct2.COMPUTE_TYPES
    assert parse_spec("ctranslate2")[2] == {"compute_type": "float32"}  # the CPU default unchanged
    assert ct2.converted_model("/host/models/llama3-8b", "bfloat16") == Path("/host/models/ct2/llama3-8b-bfloat16")
    assert ENGINES["ctranslate2"].model.name == "tiny-llama" or os.environ.get("RIG_CT2_MODEL")


@settings(max_examples=40, deadline=None)
@given(compute_type=st.text(min_size=0, max_size=12).filter(lambda t: t not in ct2.COMPUTE_TYPES))
def test_the_converter_refuses_an_unknown_compute_type_in_one_line(compute_type: str):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert ct2.main([str(REPO / "models" / "tiny-llama"), compute_type]) == 2
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "python -m loadtest.inprocess.ct2" in lines[0]


@pytest.mark.parametrize("argv", [[], ["models/tiny-llama"], ["/nonexistent", "bfloat16"], ["a", "b", "c"]])
def test_the_converter_refuses_a_missing_folder_or_argument_in_one_line(argv: list[str]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert ct2.main(argv) == 2
    assert err.getvalue().count("\n") == 1 and err.getvalue().startswith("error: ")


@pytest.mark.engine  # converts the tiny model (CTranslate2's converter) and starts a real worker
@pytest.mark.skipif(not _TRANSFORMERS_PYTHON.exists(), reason="no .venv-transformers (scripts/install.sh)")
def test_on_a_host_without_cuda_the_gpu_variant_fails_in_one_line(tmp_path: Path):
    done = subprocess.run([str(_TRANSFORMERS_PYTHON), "-m", "loadtest.inprocess.ct2", "models/tiny-llama",
                           "bfloat16"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "converted models/tiny-llama" in done.stdout, done.stderr[-2000:]
    done = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "loadtest.inprocess", "ctranslate2:cuda",
                           "--batch", "1", "--requests", "2", "--max-tokens", "8", "--out", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "ctranslate2" in errors[0] and "CUDA" in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_the_converter_without_ctranslate2_says_so_in_one_line():
    """The rig's own venv has no CTranslate2: one error line naming the install, no traceback."""
    done = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "loadtest.inprocess.ct2", "models/tiny-llama",
                           "bfloat16"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "no CTranslate2 converter" in done.stderr
