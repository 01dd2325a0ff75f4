"""vLLM's OpenAI server (vllm/vllm-openai image), port 8000.

The model is given as ``--model X``: it works under both the old
``python3 -m vllm.entrypoints.openai.api_server`` entrypoint and the newer
``vllm serve`` one. N-gram speculation uses the dotted form of
``--speculative-config`` (``--speculative-config.method ngram ...``), because a
JSON value cannot be written inside a Compose ``${VAR:+...}`` expression.
"""

from servers.engine import Engine

__all__ = ["ENGINE", "VLLM_FLAGS", "VLLM_REFUSED"]

VLLM_FLAGS: dict[str, tuple[str, ...]] = {
    "MODEL": ("--model", "{}"),
    "SERVED_MODEL_NAME": ("--served-model-name", "{}"),
    "DTYPE": ("--dtype", "{}"),
    "QUANTIZE": ("--quantization", "{}"),
    "SPECULATE": (
        "--speculative-config.method", "ngram",
        "--speculative-config.num_speculative_tokens", "{}",
        "--speculative-config.prompt_lookup_max", "4",
    ),
    "MAX_TOTAL_TOKENS": ("--max-model-len", "{}"),
    "MAX_BATCH_PREFILL_TOKENS": ("--max-num-batched-tokens", "{}"),
    "MAX_CONCURRENT_REQUESTS": ("--max-num-seqs", "{}"),
    "SHARDS": ("--tensor-parallel-size", "{}"),
    "GPU_MEMORY_FRACTION": ("--gpu-memory-utilization", "{}"),
}

VLLM_REFUSED: dict[str, str] = {
    "MAX_INPUT_TOKENS": "vLLM has no prompt-only limit; MAX_TOTAL_TOKENS (--max-model-len) bounds prompt + output",
}

ENGINE = Engine(
    slug="vllm",
    image="vllm/vllm-openai:v0.26.0",
    image_source="vLLM 0.26.0 = vllm/vllm-openai:latest on 2026-07 (docker image inspect, jetson-ai-lab PR #420)",
    host_port=8000,
    container_port=8000,
    args=("--host", "0.0.0.0", "--port", "8000"),
    flags=VLLM_FLAGS,
    refused=VLLM_REFUSED,
    defaults={"MODEL": "Qwen/Qwen2.5-0.5B-Instruct"},
    service={"ipc": "host"},
)
