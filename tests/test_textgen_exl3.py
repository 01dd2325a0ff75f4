"""text-generation-webui's ExLlamav3 loaders as the local GPU engine's option (RIG_TEXTGEN_LOADER,
servers/textgen.py) and the EXL3 conversion script: rendered commands and refusals, on CPU."""

from __future__ import annotations

import ast
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servers import textgen
from servers.llamacpp_cpu import DEFAULT_SLOTS, SLOT_TOKENS

ROOT = Path(__file__).resolve().parents[1]
TARBALLS = sorted((ROOT.parent / "shared/vendor").glob("text-generation-webui-1dcde41d03d1*.tar.gz"))
PORT = 5123


@pytest.mark.parametrize("name", textgen.EXL3_LOADERS)
def test_an_exl3_loader_serves_the_exl3_folder_with_one_shared_cache(name: str, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIG_TEXTGEN_LOADER", name)
    monkeypatch.setenv("RIG_TEXTGEN_MODEL", str(tmp_path / "llama3-8b-exl3-4.0"))
    argv = textgen.command(PORT, [])
    assert argv[:7] == [str(textgen.PYTHON), str(textgen.BOOT), str(textgen.SOURCE), "--nowebui", "--api",
                        "--api-port", str(PORT)]
    assert dict(zip(argv[7::2], argv[8::2])) == {
        "--loader": name, "--model-dir": str(tmp_path), "--model": "llama3-8b-exl3-4.0",
        "--ctx-size": str(DEFAULT_SLOTS * SLOT_TOKENS)}  # llama.cpp's slots' total, one cache
    users = textgen.command(PORT, ["--max_seq_len", "65536", "--cache-type", "q8"])
    assert "--ctx-size" not in users and users[-4:] == ["--max_seq_len", "65536", "--cache-type", "q8"]


def test_llama_cpp_stays_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIG_TEXTGEN_LOADER", raising=False)
    assert textgen.flag(textgen.command(PORT, []), "--loader") == "llama.cpp"


def test_the_loaders_are_the_vendored_trees() -> None:
    if not TARBALLS:
        pytest.skip("no text-generation-webui tarball in ../shared/vendor")
    with tarfile.open(TARBALLS[0]) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/modules/loaders.py"))
        tree = ast.parse(tar.extractfile(member).read())  # type: ignore[union-attr]
    call = next(n.value for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "loaders_and_params")
    assert tuple(ast.literal_eval(k) for k in call.args[0].keys) == textgen.LOADERS  # type: ignore[attr-defined]


@settings(max_examples=200, deadline=None, database=None)
@given(name=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=16))
def test_any_loader_is_taken_or_refused_in_one_line(name: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RIG_TEXTGEN_LOADER", name)
        patch.setattr(textgen, "missing_source", lambda: None)
        why = textgen.missing()
    if name in ("llama.cpp", *textgen.EXL3_LOADERS):  # then what the loader itself lacks here
        assert why is None or ("\n" not in why and "RIG_TEXTGEN_LOADER" not in why)
    else:
        assert why and "\n" not in why and why.startswith(f"RIG_TEXTGEN_LOADER {name!r}: ")
        assert ("not a loader" in why) == (name not in textgen.LOADERS)


def test_an_exl3_loader_names_the_model_the_gpu_then_the_bundle(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIG_TEXTGEN_LOADER", "ExLlamav3")
    monkeypatch.setenv("RIG_TEXTGEN_MODEL", str(tmp_path))
    monkeypatch.setattr(textgen, "missing_source", lambda: None)
    assert textgen.missing() == f"no EXL3 model at {tmp_path}: set RIG_TEXTGEN_MODEL to a folder " \
                                "scripts/convert_exl3.sh wrote"
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setattr(textgen, "_nvidia_gpu", lambda: False)
    assert (textgen.missing() or "").startswith("no NVIDIA GPU here")
    monkeypatch.setattr(textgen, "_nvidia_gpu", lambda: True)
    assert (textgen.missing() or "").startswith(f"exllamav3 is not installed for {textgen.PYTHON}")


def test_rig_engine_start_refuses_a_loader_not_in_the_tree_in_one_line(tmp_path: Path) -> None:
    started = subprocess.run([sys.executable, "-m", "loadtest.local_engine", "start", "--engine", "textgen",
                              "--pidfile", str(tmp_path / "engine.pid")], cwd=ROOT, capture_output=True,
                             text=True, timeout=120, env={**_env(), "RIG_TEXTGEN_LOADER": "exllama"})
    assert started.returncode == 2
    assert started.stderr.splitlines() == [
        "error: RIG_TEXTGEN_LOADER 'exllama': not a loader of text-generation-webui 1dcde41d03d1 "
        "(llama.cpp, Transformers, ExLlamav3_HF, ExLlamav3, TensorRT-LLM)"]
    assert not (tmp_path / "engine.pid").exists()


def _env() -> dict[str, str]:
    import os
    return {k: v for k, v in os.environ.items() if not k.startswith("RIG_TEXTGEN")}


# ---- scripts/convert_exl3.sh ----

def _convert(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ROOT / "scripts/convert_exl3.sh"), *args], capture_output=True, text=True,
                          timeout=60, env={**_env(), "RIG_EXLLAMAV3_PYTHON": sys.executable})


def _one_error(result: subprocess.CompletedProcess[str], said: str) -> None:
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [f"error: {said}"], result.stderr


@settings(max_examples=60, deadline=None, database=None)
@given(bits=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=8))
def test_any_bits_are_taken_or_refused_in_one_line(bits: str) -> None:
    result = _convert(str(ROOT / "servers"), "/nonexistent/out", bits)  # servers/ has no config.json
    assert result.returncode == 2 and "\n" not in result.stderr.strip()


def test_the_converter_refuses_before_it_runs(tmp_path: Path) -> None:
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    _one_error(_convert(str(tmp_path / "none"), str(tmp_path / "o"), "4.0"), f"no model at {tmp_path / 'none'} (no config.json)")
    _one_error(_convert(str(hf), str(tmp_path / "o"), "9"), "bits per weight '9': a number from 1 to 8, e.g. 4.0")
    _one_error(_convert(str(hf), str(tmp_path / "o")), "give HF_DIR OUT_DIR BITS [CAL_ROWS CAL_COLS] (got 2 argument(s)); --help says more")
    _one_error(_convert(str(hf), str(tmp_path / "o"), "4.0", "16", "x"),
               "calibration rows and columns '16' 'x': two whole numbers from 1, e.g. 16 512")
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "x").write_text("")
    _one_error(_convert(str(hf), str(tmp_path / "o"), "4.0"), f"{tmp_path / 'o'} is not empty: give a new folder")


def test_the_converter_runs_exllamav3s_module_and_keeps_its_work_on_failure(tmp_path: Path) -> None:
    """This Python has no exllamav3: the converter's own command runs and fails, in one line."""
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    result = _convert(str(hf), str(tmp_path / "o"), "6.0", "16", "512")
    assert "exllamav3.conversion.convert_model" in result.stderr
    assert result.returncode == 2 and result.stderr.splitlines()[-1].startswith("error: exllamav3's converter failed")
    assert (tmp_path / "o.work").is_dir()
