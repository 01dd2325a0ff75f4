"""exllamav3 in-process (loadtest/inprocess/exl3.py), what runs without a GPU: the table's entry,
the refusals `rig inprocess` and `rig latency` give before and after the worker starts (a real
worker, in an interpreter without exllamav3), and the cache arithmetic that decides which
batches fit. The engine itself runs on a lent GPU (evidence/2026-11-28/exl3-lease/lease.sh).
"""

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
from loadtest.inprocess import cli as inprocess_cli
from loadtest.inprocess.engines import ENGINES
from loadtest.inprocess.exl3 import MAX_BATCH, PAGE, TOKENS_PER_JOB, cache_tokens
from loadtest.race import latency as latency_preset


def _rig(module: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / ".venv/bin/python"), "-m", module, *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env={**os.environ, **env})


def _one_error(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in done.stderr, done.stderr[-2000:]


def test_the_table_names_the_bundles_interpreter_and_an_exl3_folder():
    engine = ENGINES["exllamav3"]
    assert engine.adapter == "loadtest.inprocess.exl3" and engine.batches
    assert "--name exllamav3" in engine.install and "convert_exl3.sh" in engine.install


def test_without_the_bundle_the_run_names_the_install(tmp_path: Path):
    env = {"RIG_EXLLAMAV3_PYTHON": str(tmp_path / "none/python"), "RIG_EXLLAMAV3_MODEL": str(tmp_path)}
    _one_error(_rig("loadtest.inprocess", "exllamav3", "--out", str(tmp_path / "out"), env=env),
               "for exllamav3: run scripts/gpu_bundle.sh install ... --name exllamav3")


def test_without_the_model_the_run_names_the_conversion(tmp_path: Path):
    env = {"RIG_EXLLAMAV3_PYTHON": str(REPO / ".venv/bin/python"),
           "RIG_EXLLAMAV3_MODEL": str(tmp_path / "no-such-exl3")}
    _one_error(_rig("loadtest.inprocess", "exllamav3", "--out", str(tmp_path / "out"), env=env),
               "no model at")


@pytest.mark.engine  # the worker starts (its adapter refuses before any engine loads)
def test_an_interpreter_without_exllamav3_is_refused_by_the_worker_in_one_line(tmp_path: Path):
    """The worker starts for real and its adapter finds no exllamav3 (the rig's own venv)."""
    (tmp_path / "exl3").mkdir()
    env = {"RIG_EXLLAMAV3_PYTHON": str(REPO / ".venv/bin/python"), "RIG_EXLLAMAV3_MODEL": str(tmp_path / "exl3")}
    done = _rig("loadtest.inprocess", "exllamav3", "--batch", "1,4", "--requests", "2",
                "--out", str(tmp_path / "out"), env=env)
    _one_error(done, "exllamav3 is not importable here")
    assert "RIG_EXLLAMAV3_PYTHON" in done.stderr


def _refused_here(checked_args, argv: list[str], message: str) -> None:
    """The command's own checks, in this process: exit 2 and one `error:` line."""
    err = io.StringIO()
    with pytest.raises(SystemExit) as exited, contextlib.redirect_stderr(err):
        checked_args(argv)
    errors = [line for line in err.getvalue().splitlines() if line.startswith("error: ")]
    assert exited.value.code == 2 and len(errors) == 1 and message in errors[0], err.getvalue()


@settings(max_examples=50, deadline=None)
@given(st.text(st.characters(codec="ascii", exclude_characters="\x00:"), min_size=1, max_size=10))
def test_exllamav3_has_no_variant_but_its_default(variant: str):
    for checked_args in (inprocess_cli.checked_args, latency_preset.checked_args):
        _refused_here(checked_args, [f"exllamav3:{variant}"],
                      f"exllamav3 has no variant {variant!r}; one of: exllamav3")


@settings(max_examples=50, deadline=None)
@given(st.one_of(st.integers(max_value=0).map(str), st.sampled_from(["1,,4", "x", "4.5", "", "4,-1"]),
                 st.text(st.characters(codec="ascii", exclude_characters="\x00,0123456789"), min_size=1)))
def test_a_bad_batch_is_one_error_line(batch: str):
    _refused_here(inprocess_cli.checked_args, ["exllamav3", "--batch", batch], "--batch")


@settings(max_examples=200, deadline=None)
@given(st.integers(1, MAX_BATCH), st.integers(1, 8 * TOKENS_PER_JOB))
def test_the_cache_holds_each_job_in_whole_pages(batch: int, per_job: int):
    tokens = cache_tokens(batch, per_job)
    assert tokens % PAGE == 0 and tokens % batch == 0
    assert per_job <= tokens // batch < per_job + PAGE


def test_the_default_cache_fits_the_largest_batch_of_the_prompt_sets():
    assert cache_tokens(MAX_BATCH) == MAX_BATCH * TOKENS_PER_JOB
