"""A model folder that every engine's transformers reads alike (standard library only: the GPU
host's scripts import it before anything is installed)."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["readable_by_transformers_4"]


def readable_by_transformers_4(folder: Path) -> None:
    """Transformers 5 writes the RoPE base only under ``rope_parameters`` and names its tokenizer
    class ``TokenizersBackend``; engines pinned to transformers 4 (Aphrodite 0.21: 4.57) then run
    RoPE at 4's default base of 10,000 instead of 100,000 (answers drift: 267 of 278 graded tasks
    right on an H200, against 278) or refuse the tokenizer. Both spellings are written: 5 reads
    ``rope_parameters`` first, 4 the top-level ``rope_theta``; the tokenizer is the same
    tokenizer.json under the class name both know."""
    config_path, tokenizer_path = folder / "config.json", folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    rope = config.get("rope_parameters") or {}
    if "rope_theta" in rope and "rope_theta" not in config:
        config["rope_theta"] = rope["rope_theta"]
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tokenizer = json.loads(tokenizer_path.read_text())
    if tokenizer.get("tokenizer_class") == "TokenizersBackend":
        tokenizer["tokenizer_class"] = "PreTrainedTokenizerFast"
        tokenizer_path.write_text(json.dumps(tokenizer, indent=2, sort_keys=True) + "\n")
