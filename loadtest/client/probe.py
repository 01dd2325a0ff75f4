"""Ask the engine, once, before the run: is it there, which model does it serve, which version.

Plain blocking GETs with a short timeout; any failure is one line for the user. An engine
pinned to one model that it does not list (transformers serve) is asked with one POST naming
no model, which it refuses (HTTP 400) before generating anything, naming the model it serves.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.client.protocols.openai import PATHS as OPENAI_PATHS
from loadtest.workload.spec import Workload
from loadtest.workload.tokens import load_token_text
from loadtest.results.redact import redact_url

__all__ = ["EngineInfo", "ProbeError", "check_prompts_fit", "check_request_fits",
           "check_tokenizer_matches", "probe_engine"]

# Distinct prompts counted by the engine, at most (a dataset may hold thousands).
_MAX_TOKENIZED = 256


class ProbeError(RuntimeError):
    """The engine cannot be reached or does not answer as expected; one line for the user."""


@dataclass(frozen=True)
class EngineInfo:
    model: str
    engine_version: str
    model_root: str = ""  # where the engine loaded the model from (vLLM's /v1/models "root")
    models: tuple[str, ...] = ()  # every model id the engine lists (empty: it lists none)
    max_model_len: int | None = None  # prompt + output tokens per request, where it says (vLLM)


def probe_engine(url: str, api: str, headers: dict[str, str], timeout_s: float = 10.0,
                 pinned_model: bool = False) -> EngineInfo:
    if api == "generate":  # TGI native
        info = _get_json(url + "/info", headers, timeout_s)
        return EngineInfo(str(info.get("model_id", "")), str(info.get("version", "")))
    if pinned_model:
        model = _pinned_model(url, api, headers, timeout_s)
        return EngineInfo(model, "", model)
    models = _get_json(url + "/v1/models", headers, timeout_s)
    listed = models.get("data")  # an engine may answer anything: only a list names models
    data = [entry for entry in listed if isinstance(entry, dict)] if isinstance(listed, list) else []
    first = data[0] if data else {}
    model, root = str(first.get("id", "")), str(first.get("root") or "")
    max_len = first.get("max_model_len")
    version = ""
    try:
        version = str(_get_json(url + "/version", headers, timeout_s).get("version", ""))
    except ProbeError:
        pass  # not every engine has /version
    return EngineInfo(model, version, root, models=tuple(str(e.get("id", "")) for e in data),
                      max_model_len=max_len if isinstance(max_len, int) and max_len > 0 else None)


def check_request_fits(info: EngineInfo, model: str, max_tokens: int, pinned_model: bool) -> None:
    """ProbeError, before anything is sent, when every request would fail alike: a model the
    engine does not serve (where it lists its models or is pinned to one), or an output length
    that leaves no room for a prompt in the engine's context (where it says how long that is)."""
    served = info.models or ((info.model,) if pinned_model and info.model else ())
    if model and served and model not in served:
        raise ProbeError(f"--model {model!r} is not served here; the engine serves: "
                         f"{', '.join(served)}")
    if info.max_model_len is not None and max_tokens >= info.max_model_len:
        raise ProbeError(f"--max-tokens {max_tokens} leaves no room for a prompt: the engine "
                         f"takes at most {info.max_model_len} tokens per request, prompt included")


def check_prompts_fit(url: str, headers: dict[str, str], info: EngineInfo, workload: Workload,
                      timeout_s: float = 10.0) -> None:
    """ProbeError, before anything is sent, when the workload's tokenizer is not the served
    model's, or a request and its output length do not fit in the engine's context (where it
    says how long that is). Token-exact sources know their counts (Workload.longest); other
    prompts are counted by the engine's own tokenizer, chat template included (vLLM's POST
    /tokenize), once per distinct prompt."""
    check_tokenizer_matches(url, headers, workload, timeout_s)
    if info.max_model_len is None:
        return
    if workload.longest is not None:
        prompt_id, prompt_tokens, output_tokens = workload.longest
        _refuse_beyond(info, prompt_id, prompt_tokens, output_tokens)
        return
    asked: set[str] = set()
    for spec in workload.specs[:_MAX_TOKENIZED] if not workload.sessions else ():
        if spec.prompt_id in asked:
            continue
        asked.add(spec.prompt_id)
        body = json.loads(spec.body)
        question = {key: body[key] for key in ("model", "prompt", "messages") if key in body}
        try:
            answer = _get_json(url + "/tokenize", {**headers, "Content-Type": "application/json"},
                               timeout_s, data=json.dumps(question).encode())
        except ProbeError:
            return  # no /tokenize here: a prompt that does not fit fails its own request
        count = answer.get("count")
        if isinstance(count, int):
            _refuse_beyond(info, spec.prompt_id, count, body.get("max_tokens", 0))


def check_tokenizer_matches(url: str, headers: dict[str, str], workload: Workload,
                            timeout_s: float = 10.0) -> None:
    """ProbeError when the tokenizer a token-exact workload was built with encodes a probe text
    otherwise than the engine does (vLLM's and llama.cpp's POST /tokenize); engines without
    /tokenize are not asked (the run's prompt_tokens_mismatch check still catches it)."""
    path = str(workload.columns.get("tokenizer") or "")
    if not path:
        return
    text, ids = load_token_text(Path(path)).probe
    question = {"prompt": text, "content": text, "add_special": True}  # vLLM's, llama.cpp's keys
    try:
        answer = _get_json(url + "/tokenize", {**headers, "Content-Type": "application/json"},
                           timeout_s, data=json.dumps(question).encode())
    except ProbeError:
        return
    theirs = answer.get("tokens")
    if not isinstance(theirs, list) or not all(isinstance(t, int) for t in theirs):
        return
    if not _same_but_specials(theirs, ids):
        raise ProbeError(f"the tokenizer {path} does not match the served model: the engine "
                         f"encodes a probe text to {len(theirs)} tokens, the file to {len(ids)} "
                         f"(first ids {theirs[:4]} vs {ids[:4]}); pass --tokenizer with the "
                         "served model's tokenizer.json")


def _same_but_specials(theirs: list[int], ours: list[int]) -> bool:
    """The same ids, give or take up to two special tokens in front (a BOS one side adds and
    the other does not: the run's prompt_tokens_mismatch check names it, it is no refusal)."""
    short, long = sorted((theirs, ours), key=len)
    return len(long) - len(short) <= 2 and long[len(long) - len(short):] == short


def _refuse_beyond(info: EngineInfo, prompt_id: str, prompt_tokens: int, output_tokens: int) -> None:
    assert info.max_model_len is not None
    if prompt_tokens + output_tokens > info.max_model_len:
        raise ProbeError(f"prompt {prompt_id!r} is {prompt_tokens} tokens; with {output_tokens} "
                         f"output tokens that is {prompt_tokens + output_tokens}, beyond the "
                         f"engine's context of {info.max_model_len} tokens per request")


_PINNED = re.compile(r"pinned to '(.+)'; requested")


def _pinned_model(url: str, api: str, headers: dict[str, str], timeout_s: float) -> str:
    """transformers serve answers a request for any other model with HTTP 400 "Server is pinned
    to 'X'; requested ''." (checked in transformers 5.17 and 5.23); "" when it names none."""
    body = json.dumps({"model": ""}).encode()
    try:
        _get_json(url + OPENAI_PATHS[api], {**headers, "Content-Type": "application/json"}, timeout_s,
                  data=body)
    except _HTTPStatus as exc:
        found = _PINNED.search(exc.body)
        return found.group(1) if found else ""
    return ""


class _HTTPStatus(ProbeError):
    def __init__(self, message: str, body: str) -> None:
        super().__init__(message)
        self.body = body


def _get_json(url: str, headers: dict[str, str], timeout_s: float,
              data: bytes | None = None) -> dict[str, Any]:
    """GET ``url`` (POST ``data`` when given) and parse its JSON object answer."""
    shown = redact_url(url)
    sent = ("Authorization", "Content-Type") if data is not None else ("Authorization",)
    request = urllib.request.Request(url, data=data,
                                     headers={k: v for k, v in headers.items() if k in sent})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    try:
        with opener.open(request, timeout=timeout_s) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        text = exc.read(2000).decode("utf-8", "replace")
        raise _HTTPStatus(f"{shown} answered HTTP {exc.code}", text) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ProbeError(f"cannot reach {shown}: {reason}") from None
    try:
        parsed = json.loads(body)
    except ValueError:
        raise ProbeError(f"{shown} did not answer JSON") from None
    if not isinstance(parsed, dict):
        raise ProbeError(f"{shown} did not answer a JSON object")
    return parsed
