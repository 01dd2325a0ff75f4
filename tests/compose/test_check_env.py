"""python -m servers.check: the .env that `docker compose up` reads, checked before it starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from servers import SettingError
from servers.check import check, read_env_file

ROOT = Path(__file__).resolve().parents[2]


def _check_cli(env_file: Path, *engines: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TGI_", "VLLM_", "TEXTGEN_"))}
    return subprocess.run([sys.executable, "-m", "servers.check", *engines, "--env-file", str(env_file)],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)


@pytest.mark.parametrize("content, message", [
    ("TGI_QUANTIZE=nope\n", "error: tgi: QUANTIZE must be one of awq,"),
    ("TEXTGEN_DTYPE=float16  # a comment\n", "error: textgen does not support DTYPE (TEXTGEN_DTYPE)"),
    ("VLLM_MAX_CONCURRENT_REQUESTS='abc'\n", "error: vllm: MAX_CONCURRENT_REQUESTS must be a whole number"),
    ("TGI_GPUS=0,0\n", "error: tgi: GPUS lists a GPU twice"),
])
def test_a_refused_setting_is_one_error_line_and_exit_2(tmp_path: Path, content: str, message: str) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(content)
    result = _check_cli(env_file)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(message), result.stderr


def test_the_shipped_example_and_a_good_env_pass(tmp_path: Path) -> None:
    example = _check_cli(ROOT / ".env.example")
    assert example.returncode == 0, example.stderr
    env_file = tmp_path / ".env"
    env_file.write_text('export TGI_MODEL="Qwen/Qwen2.5-0.5B-Instruct"\nTGI_QUANTIZE=fp8\n')
    result = _check_cli(env_file, "tgi")
    assert result.returncode == 0 and "ok: tgi (TGI_MODEL, TGI_QUANTIZE)" in result.stdout


def test_gpu_indexes_are_checked_against_the_host_when_it_says() -> None:
    with pytest.raises(SettingError, match="GPUS names GPU 7 but this host has 2 GPU"):
        check(["tgi"], {"TGI_GPUS": "0,7"}, gpus=2)
    assert check(["tgi"], {"TGI_GPUS": "0,7"}, gpus=None) == ["ok: tgi (TGI_GPUS)"]  # no driver


def test_a_line_that_is_no_setting_is_refused_with_its_place(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("TGI_MODEL=x\nnot a setting\n")
    result = _check_cli(env_file)
    assert result.returncode == 2 and result.stderr == f"error: {env_file}:2: not a KEY=VALUE line\n"


def test_env_file_reading_follows_compose(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("# comment\n\nA=1\nB='two words'\nC=x # note\nexport D=\"q\"\n")
    assert read_env_file(env_file) == {"A": "1", "B": "two words", "C": "x", "D": "q"}
    assert read_env_file(tmp_path / "none") == {}
