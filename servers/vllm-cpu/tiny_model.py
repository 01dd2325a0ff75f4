"""Build the embedded engine's model: a tiny random-weight Llama with its own tokenizer.

No model hub is reachable, so the model is made here: a byte-level BPE tokenizer trained with
`tokenizers` on local text (five of this repository's prompt sets, named, and Python's own docs:
one interpreter version gives one tokenizer), and a Llama with random weights. vLLM's CPU attention needs head_dim >= 64. The output is deterministic
(fixed seed), so every machine benchmarks the same model; its sha256 is written beside it.
`--shape tinyllama-1.1b` builds the same kind of model at TinyLlama-1.1B's shape (22 layers,
hidden 2048, grouped-query attention, 32,000-row embedding), for GPUs. `--shape llama3-8b` is
Llama-3-8B's shape (32 layers, hidden 4096, 8 KV heads, 128,256-row embedding, rope theta
500,000, 8,192 positions): about 16 GB in bf16, so its weights are drawn tensor by tensor
(normal, std 0.02; norms 1), on the GPU where torch sees one, and written in safetensors shards
as they come, never the whole model in memory; its seed is per tensor, so the same device kind
gives the same weights (a GPU's draws differ from a CPU's: the sha256 beside it tells them apart).
The larger shapes keep the tiny tokenizer (4,096 tokens): the embedding rows past it go unused.

usage: python servers/vllm-cpu/tiny_model.py [--shape tiny|tinyllama-1.1b|llama3-8b] OUT_DIR
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from servers.model_folder import readable_by_transformers_4  # noqa: E402

VOCAB_SIZE = 4096
MAX_POSITIONS = 4096
SHAPES = {
    "tiny": dict(vocab_size=VOCAB_SIZE, hidden_size=256, intermediate_size=688,
                 num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4),  # head_dim 64
    # TinyLlama-1.1B's shape; the embedding has more rows than the tokenizer has tokens (unused).
    "tinyllama-1.1b": dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632,
                           num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4),
    # Meta-Llama-3-8B's config.json
    "llama3-8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                      num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                      rope_theta=500000.0, max_position_embeddings=8192),
}
# Shapes too large to build as one model in memory: drawn tensor by tensor (build_model_sharded)
SHARDED = {"llama3-8b"}
SHARD_BYTES = 2 * 1024**3
INIT_STD = 0.02  # LlamaConfig's initializer_range


# The prompt sets the tokenizer learns from, named rather than globbed: a prompt set added later
# (graded.jsonl) would otherwise change the tokenizer, hence the model's digest, and runs made
# before and after it could no longer be compared. Their bytes' digest is pinned by a test.
TOKENIZER_PROMPT_SETS = ("mixed.jsonl", "story.jsonl", "structured-json.jsonl",
                         "structured-regex.jsonl", "structured-tools.jsonl")


def tokenizer_prompt_sets_sha256() -> str:
    digest = hashlib.sha256()
    for name in TOKENIZER_PROMPT_SETS:
        digest.update((REPO / "loadtest" / "prompts" / name).read_bytes())
    return digest.hexdigest()


def _training_text() -> list[str]:
    import pydoc_data.topics  # ships with CPython: ~800 KB of English prose about Python

    lines = [text for text in pydoc_data.topics.topics.values()]
    for name in TOKENIZER_PROMPT_SETS:
        lines.extend((REPO / "loadtest" / "prompts" / name).read_text(encoding="utf-8").splitlines())
    return lines


def build_tokenizer(out: Path, shape: str = "tiny") -> None:
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


def config_fields(shape: str) -> dict[str, object]:
    """The LlamaConfig fields ``shape`` is built with (plain values: nothing imported)."""
    return {"architectures": ["LlamaForCausalLM"], "max_position_embeddings": MAX_POSITIONS,
            "bos_token_id": 0, "eos_token_id": 1,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16", **SHAPES[shape]}


def model_config(shape: str):  # -> transformers.LlamaConfig
    from transformers import LlamaConfig

    return LlamaConfig(**config_fields(shape))


def parameter_shapes(shape: str) -> dict[str, tuple[int, ...]]:
    """Every weight of ``shape``'s LlamaForCausalLM, name -> shape, in transformers' order
    (checked against transformers' own layout on the meta device before a sharded build)."""
    c = SHAPES[shape]
    hidden, inter, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    head = hidden // c["num_attention_heads"]
    kv = c["num_key_value_heads"] * head
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, hidden)}
    for layer in range(c["num_hidden_layers"]):
        at = f"model.layers.{layer}."
        shapes.update({at + "self_attn.q_proj.weight": (hidden, hidden), at + "self_attn.k_proj.weight": (kv, hidden),
                       at + "self_attn.v_proj.weight": (kv, hidden), at + "self_attn.o_proj.weight": (hidden, hidden),
                       at + "mlp.gate_proj.weight": (inter, hidden), at + "mlp.up_proj.weight": (inter, hidden),
                       at + "mlp.down_proj.weight": (hidden, inter), at + "input_layernorm.weight": (hidden,),
                       at + "post_attention_layernorm.weight": (hidden,)})
    shapes.update({"model.norm.weight": (hidden,), "lm_head.weight": (vocab, hidden)})
    return shapes


def _transformers_shapes(shape: str) -> dict[str, tuple[int, ...]]:
    import torch
    from transformers import LlamaForCausalLM

    with torch.device("meta"):
        model = LlamaForCausalLM(model_config(shape))
    return {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}


def build_model(out: Path, shape: str) -> None:
    if shape in SHARDED:
        build_model_sharded(out, shape)
        return
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(model_config(shape)).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)


def build_model_sharded(out: Path, shape: str) -> None:
    """Draw each weight on the GPU (else the CPU) in bf16 and write safetensors shards of about
    SHARD_BYTES as they fill, with the index transformers and vLLM read."""
    import torch
    from safetensors.torch import save_file

    device = "cuda" if torch.cuda.is_available() else "cpu"
    shapes = parameter_shapes(shape)
    if sorted(shapes.items()) != sorted(_transformers_shapes(shape).items()):
        raise RuntimeError(f"{shape}: this transformers lays LlamaForCausalLM out differently")
    groups: list[list[str]] = [[]]
    size = 0
    for name, dims in shapes.items():
        if groups[-1] and size + 2 * math.prod(dims) > SHARD_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(name)
        size += 2 * math.prod(dims)
    seeds = {name: seed for seed, name in enumerate(shapes)}
    weight_map = {}
    for number, group in enumerate(groups, start=1):
        file = f"model-{number:05d}-of-{len(groups):05d}.safetensors"
        shard = {name: _draw(name, shapes[name], seeds[name], device) for name in group}
        save_file(shard, str(out / file), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(group, file))
        del shard  # one shard in memory at a time
    total = sum(2 * math.prod(dims) for dims in shapes.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    model_config(shape).save_pretrained(out)


def _draw(name: str, dims: tuple[int, ...], seed: int, device: str):  # -> torch.Tensor (CPU)
    import torch

    if name.endswith("norm.weight"):
        return torch.ones(dims, dtype=torch.bfloat16)
    generator = torch.Generator(device=device).manual_seed(seed)
    drawn = torch.randn(dims, generator=generator, device=device, dtype=torch.bfloat16)
    return drawn.mul_(INIT_STD).cpu()


def write_digest(out: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(out.iterdir()):
        if path.name != "model_sha256.txt":
            digest.update(path.name.encode())
            with path.open("rb") as file:  # in pieces: an 8B model's shards are 2 GB each
                for piece in iter(lambda: file.read(1 << 24), b""):
                    digest.update(piece)
    sha = digest.hexdigest()
    (out / "model_sha256.txt").write_text(sha + "\n")
    return sha


def main(argv: list[str]) -> int:
    shape = "tiny"
    if argv[:1] == ["--shape"]:
        if len(argv) < 2 or argv[1] not in SHAPES:
            got = repr(argv[1]) if len(argv) > 1 else "nothing"
            print(f"error: --shape takes one of {', '.join(SHAPES)} (got {got})", file=sys.stderr)
            return 2
        shape, argv = argv[1], argv[2:]
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    out = Path(argv[0])
    if (out / "model_sha256.txt").exists():
        print(f"model already built: {out}")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out, shape)
    build_model(out, shape)
    if shape != "tiny":  # the CPU engines' model stays byte for byte as it was (its digest)
        # the GPU shapes are served by engines pinned to transformers 4 too (Aphrodite 0.21)
        readable_by_transformers_4(out)
    print(json.dumps({"model": str(out), "sha256": write_digest(out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
