"""servers/smollm2.py's command line and its choice of GGUF variants: a bad --variants is one
`error:` line and exit 2; Q4_K_M (llama.cpp's llama-quantize) is made by default only where the
rig's llama.cpp build holds that binary, and asked for without it, it fails saying how to build it.
The folder it makes is readable by transformers 4 as by 5. Fast: nothing is downloaded (tests/test_smollm2_engine.py
serves the real model)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servers import model_folder, smollm2


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=8).filter(lambda part: part.strip() not in smollm2.VARIANTS
                                                        and "," not in part), min_size=1, max_size=3))
def test_a_bad_variant_is_one_error_line(parts: list[str]):
    if not any(part.strip() for part in parts):
        return  # only blanks: no variant named, which asks for none
    stderr = io.StringIO()
    with pytest.raises(SystemExit) as exit_, contextlib.redirect_stderr(stderr):
        smollm2.main(["--variants", ",".join(["F16", *parts])])
    assert exit_.value.code == 2
    err = stderr.getvalue().strip()
    assert err.startswith("error: argument --variants:") and "\n" not in err


def test_q4_k_m_is_left_out_by_default_without_llama_quantize(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]):
    monkeypatch.setattr(smollm2, "LLAMA_QUANTIZE", tmp_path / "llama-quantize")
    assert smollm2.default_variants() == smollm2.GGUFPY_VARIANTS
    assert "scripts/build_llamacpp.sh" in capsys.readouterr().err
    (tmp_path / "llama-quantize").write_bytes(b"")
    assert smollm2.default_variants() == smollm2.VARIANTS


def test_q4_k_m_asked_for_without_llama_quantize_says_how_to_build_it(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path):
    monkeypatch.setattr(smollm2, "LLAMA_QUANTIZE", tmp_path / "llama-quantize")
    with pytest.raises(smollm2.StepError, match="scripts/build_llamacpp.sh"):
        smollm2.quantize_variant("Q4_K_M", tmp_path / "out.gguf")


# config.json and tokenizer_config.json as transformers 5.23 writes them for SmolLM2 (the keys that
# matter here, as in the folder servers.smollm2 makes)
V5_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "head_dim": 64,
             "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"},
             "tie_word_embeddings": True, "transformers_version": "5.23.0"}
V5_TOKENIZER = {"backend": "tokenizers", "bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
                "tokenizer_class": "TokenizersBackend"}


def test_the_folder_names_its_rope_base_and_tokenizer_as_transformers_4_reads_them(tmp_path: Path):
    """Aphrodite 0.21 (transformers 4.57) read the folder's RoPE base as 10,000 (4's default: it
    knows only the top-level rope_theta) and refused the tokenizer class; both spellings now."""
    (tmp_path / "config.json").write_text(json.dumps(V5_CONFIG))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(V5_TOKENIZER))
    model_folder.readable_by_transformers_4(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    tokenizer = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config == {**V5_CONFIG, "rope_theta": 100000.0}
    assert tokenizer == {**V5_TOKENIZER, "tokenizer_class": "PreTrainedTokenizerFast"}
    written = [(tmp_path / name).read_bytes() for name in ("config.json", "tokenizer_config.json")]
    model_folder.readable_by_transformers_4(tmp_path)  # a second pass changes nothing
    assert [(tmp_path / name).read_bytes() for name in ("config.json", "tokenizer_config.json")] == written
