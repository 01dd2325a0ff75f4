"""Build the embedded engine's model: a tiny random-weight Llama with its own tokenizer.

No model hub is reachable, so the model is made here: a byte-level BPE tokenizer trained with
`tokenizers` on local text (this repository's prompt sets and Python's own docs), and a Llama
with random weights. vLLM's CPU attention needs head_dim >= 64. The output is deterministic
(fixed seed), so every machine benchmarks the same model; its sha256 is written beside it.
`--shape tinyllama-1.1b` builds the same kind of model at TinyLlama-1.1B's shape (22 layers,
hidden 2048, grouped-query attention, 32,000-row embedding), for GPUs.

usage: python servers/vllm-cpu/tiny_model.py [--shape tiny|tinyllama-1.1b] OUT_DIR
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VOCAB_SIZE = 4096
MAX_POSITIONS = 4096
SHAPES = {
    "tiny": dict(vocab_size=VOCAB_SIZE, hidden_size=256, intermediate_size=688,
                 num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4),  # head_dim 64
    # TinyLlama-1.1B's shape; the embedding has more rows than the tokenizer has tokens (unused).
    "tinyllama-1.1b": dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632,
                           num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4),
}


def _training_text() -> list[str]:
    import pydoc_data.topics  # ships with CPython: ~800 KB of English prose about Python

    lines = [text for text in pydoc_data.topics.topics.values()]
    for prompt_file in sorted((REPO / "loadtest" / "prompts").glob("*.jsonl")):
        lines.extend(prompt_file.read_text(encoding="utf-8").splitlines())
    return lines


def build_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_training_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   model_max_length=MAX_POSITIONS)
    # A minimal chat template so /v1/chat/completions works too.
    fast.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                          "{% if add_generation_prompt %}assistant: {% endif %}")
    fast.save_pretrained(out)


def build_model(out: Path, shape: str) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(max_position_embeddings=MAX_POSITIONS, bos_token_id=0, eos_token_id=1,
                         tie_word_embeddings=False, torch_dtype="bfloat16", **SHAPES[shape])
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)


def write_digest(out: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(out.iterdir()):
        if path.name != "model_sha256.txt":
            digest.update(path.name.encode() + path.read_bytes())
    sha = digest.hexdigest()
    (out / "model_sha256.txt").write_text(sha + "\n")
    return sha


def main(argv: list[str]) -> int:
    shape = "tiny"
    if len(argv) == 3 and argv[0] == "--shape" and argv[1] in SHAPES:
        shape, argv = argv[1], argv[2:]
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    out = Path(argv[0])
    if (out / "model_sha256.txt").exists():
        print(f"model already built: {out}")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out)
    build_model(out, shape)
    print(json.dumps({"model": str(out), "sha256": write_digest(out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
