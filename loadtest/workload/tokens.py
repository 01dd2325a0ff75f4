"""The served model's tokenizer, and text of an exact token count in it.

Token-exact prompts are made of whole-word tokens (" the", " cat": a space and letters) that
the tokenizer splits apart wherever they meet, so a text of N such words is N tokens, plus
whatever special tokens the tokenizer adds (BOS) when the engine encodes a prompt. Each pool
word is checked alone and beside another; the first prompts built are checked whole, so a
tokenizer that merges across words is refused rather than mis-counted.

The tokenizer is `tokenizer.json` in the served model's folder (vLLM's /v1/models "root", see
Run.model_dir), in the rig's models/NAME when the engine names its model NAME (llama.cpp's
alias), or `--tokenizer PATH` (the file or its folder). `tokenizers` (Rust) loads it.
"""

from __future__ import annotations

import hashlib
import re
from functools import cached_property
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from loadtest.toolkit.repo import REPO
from loadtest.workload.spec import WorkloadError

__all__ = ["TokenText", "find_tokenizer", "load_token_text"]

TOKENIZER_FILE = "tokenizer.json"
MODELS_DIR = REPO / "models"  # the models scripts/install.sh makes
_WORD = re.compile(r" [A-Za-z]{2,}")
_MIN_WORDS = 64  # fewer whole-word tokens than this: prompts would repeat too visibly
_cache: dict[Path, "TokenText"] = {}


def find_tokenizer(option: str, model_dir: str) -> Path:
    """`--tokenizer` (a file or a folder holding tokenizer.json), else the served model's folder,
    else the rig's own models/NAME for an engine that names its model by alias (llama.cpp)."""
    where = Path(option) if option else Path(model_dir) if model_dir else None
    if not option and where is not None and not where.is_dir() and (MODELS_DIR / model_dir).is_dir():
        where = MODELS_DIR / model_dir
    if where is None:
        raise WorkloadError("token-exact prompts need the model's tokenizer: the engine names "
                            "no local model folder, so pass --tokenizer PATH (tokenizer.json)")
    path = where / TOKENIZER_FILE if where.is_dir() else where
    if not path.is_file() and not option:
        raise WorkloadError(f"token-exact prompts need the model's tokenizer: the engine's model "
                            f"{model_dir!r} is no local folder holding {TOKENIZER_FILE}; pass "
                            "--tokenizer PATH (the model's tokenizer.json or its folder)")
    if not path.is_file():
        raise WorkloadError(f"--tokenizer {option!r}: no {TOKENIZER_FILE} there")
    return path.resolve()


def load_token_text(path: Path) -> "TokenText":
    """One TokenText per tokenizer file per process (loading and sorting the vocabulary costs)."""
    if path not in _cache:
        _cache[path] = TokenText(path)
    return _cache[path]


class TokenText:
    """Texts of exact token counts in one tokenizer."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            data = path.read_bytes()
            self.tokenizer = Tokenizer.from_str(data.decode("utf-8"))
        except (OSError, UnicodeDecodeError, Exception) as exc:  # noqa: BLE001 - tokenizers raises plain Exception
            raise WorkloadError(f"{path}: not a tokenizer file the tokenizers library reads "
                                f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
                                ) from None
        self.sha256 = hashlib.sha256(data).hexdigest()
        self.vocab_size = self.tokenizer.get_vocab_size()
        # Tokens the tokenizer adds to every encoded prompt (BOS), as an engine encodes it.
        self.special = len(self.tokenizer.encode("", add_special_tokens=True).ids)
        self.words = self._word_pool()
        self.word_lengths = np.array([len(word) for word in self.words], dtype=np.int64)

    def _word_pool(self) -> np.ndarray:
        texts = [self.tokenizer.decode([i]) for i in range(self.vocab_size)]
        candidates = [i for i, text in enumerate(texts) if _WORD.fullmatch(text)]
        alone = self.tokenizer.encode_batch([texts[i] for i in candidates], add_special_tokens=False)
        kept = [i for i, e in zip(candidates, alone) if e.ids == [i]]
        pairs = self.tokenizer.encode_batch([texts[a] + texts[b] for a, b in zip(kept, kept[1:] + kept[:1])],
                                            add_special_tokens=False)
        kept = [i for i, e in zip(kept, pairs) if len(e.ids) == 2 and e.ids[0] == i]
        if len(kept) < _MIN_WORDS:
            raise WorkloadError(f"{self.path}: only {len(kept)} whole-word tokens (a space and "
                                "letters) that stay apart; token-exact prompts need at least "
                                f"{_MIN_WORDS}")
        return np.array([texts[i] for i in kept], dtype=object)

    def draw(self, rng: np.random.Generator, tokens: int) -> str:
        """A random text that the engine encodes to exactly `tokens` tokens (special included)."""
        return "".join(self.words[rng.integers(0, len(self.words), tokens - self.special)].tolist())

    def words_text(self, rng: np.random.Generator, words: int) -> str:
        """`words` random pool words: a piece (prefix, suffix, block) of a longer prompt."""
        return "".join(self.words[rng.integers(0, len(self.words), words)].tolist())

    def count(self, text: str) -> int:
        """Tokens in `text` as an engine encodes a prompt (special tokens included)."""
        return len(self.tokenizer.encode(text, add_special_tokens=True).ids)

    def check_exact(self, texts: list[tuple[str, int]]) -> None:
        """WorkloadError when any (text, tokens asked) does not encode to its count."""
        encoded = self.tokenizer.encode_batch([text for text, _ in texts], add_special_tokens=True)
        for (_, asked), got in zip(texts, encoded):
            if len(got.ids) != asked:
                raise WorkloadError(f"{self.path}: a prompt built to {asked} tokens encodes to "
                                    f"{len(got.ids)}: this tokenizer merges across words, so "
                                    "token-exact prompts cannot be built with it")

    @cached_property
    def probe(self) -> tuple[str, list[int]]:
        """A fixed text and its ids, to compare with the engine's own tokenization."""
        text = "".join(self.words[:32]) + " 12345, Hello!"
        return text, self.tokenizer.encode(text, add_special_tokens=True).ids

    def min_tokens(self) -> int:
        return self.special + 1
