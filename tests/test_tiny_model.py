"""The tiny model is the same model on every clone: what its tokenizer learns from is pinned."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The bytes of the prompt sets the tiny tokenizer is trained on (models/tiny-llama's digest
# ea60582b… on Python 3.11). Editing one of them changes the tiny model: every run before the edit
# stops comparing with every run after it (the report tells models apart by digest). Add a new
# prompt set instead, or change this digest knowingly.
TOKENIZER_PROMPT_SETS_SHA256 = "08fd5ccd3e9949c543e64fe992ac4dbab12227e4fbb3ef33439ee0e19c56868f"


def _tiny_model():
    spec = importlib.util.spec_from_file_location(
        "tiny_model", ROOT / "servers" / "vllm-cpu" / "tiny_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tokenizers_prompt_sets_are_named_and_their_bytes_pinned() -> None:
    tiny_model = _tiny_model()
    assert tiny_model.tokenizer_prompt_sets_sha256() == TOKENIZER_PROMPT_SETS_SHA256
    shipped = {path.name for path in (ROOT / "loadtest" / "prompts").glob("*.jsonl")}
    assert set(tiny_model.TOKENIZER_PROMPT_SETS) <= shipped
    assert "graded.jsonl" in shipped - set(tiny_model.TOKENIZER_PROMPT_SETS)
