"""The closed list of warnings a run can carry, each with its cause and remedy.

Warnings are printed to stderr at the end of the run and stored in its row (`warnings`), so a
number is never read without the reason to doubt it.
"""

from __future__ import annotations

from typing import Any

from loadtest.results.verdict import engine_held_peak

__all__ = ["ERROR_REMEDIES", "WARNINGS", "check_run", "error_remedies"]

WARNINGS = {
    "client_cpu_high": "a client process peaked above 90% of a core, so it may have delayed its "
                       "own timestamps: add --processes, or fewer users per process",
    "failed_requests": "some requests failed: see the errors column and requests.jsonl",
    "output_tokens_from_chunks": "the engine reported no usable token count for some or all "
                                 "requests, so their output tokens are counted stream chunks "
                                 "(a chunk may hold several tokens)",
    "uneven_output_lengths": "requests stopped at different lengths (min and max differ by more "
                             "than 10%), so tok/s compares unequal work: use --ignore-eos",
    "too_few_requests": "fewer than 2 requests per user: the run measures ramp-up and tail, not "
                        "a steady state; raise --requests",
    "short_run": "the run took under 5 s; timings this short are noisy: raise --requests",
    "buffered_streams": "some long answers arrived all at once (buffered_requests counts them), "
                        "so their TTFT is their end-to-end time: a buffering proxy, or an "
                        "engine whose API server is starved of CPU; check what sits in between",
    "reconnects": "the server closed kept-alive connections before answering, and those requests "
                  "were sent again on a fresh connection (reconnects counts them; their times "
                  "include the reconnect): normal for llama.cpp's server, which closes after "
                  "every streamed answer; a sign of a starved API server elsewhere",
    "rate_limited": "the endpoint answered 429 (rate limited): those requests waited as its "
                    "Retry-After said and were sent again (rate_limited counts the 429s, "
                    "rate_limited_wait_s their waiting); throughput then measures the endpoint's "
                    "quota, not its engine",
    "engine_shared": "the engine held more requests at once than this run's users can send, so "
                     "another client shared it and these numbers are not this run's alone",
    "engine_flaws": "the engine answered some requests with values the rig ignored "
                    "(flawed_requests counts them, engine_flaws says what: a token count that is "
                    "no count, a wrong Content-Type, a second [DONE]); their output tokens are "
                    "counted chunks: check what serves this endpoint, or a proxy in between",
    "token_text_mismatch": "--recount: some answers' token ids do not decode, with the served "
                           "model's tokenizer, to the text that arrived (recount_text_mismatches): "
                           "the engine's tokenizer or its detokenizing differs from the model's",
    "prompt_tokens_mismatch": "the engine read some prompts as another token count than the "
                              "workload built them to (prompt_tokens_mismatched counts them, "
                              "prompt_tokens_mismatch_cause says why: a chat template, a BOS, "
                              "another tokenizer); pass the served model's --tokenizer, or use "
                              "--api completions for token-exact prompts",
    "prefix_cache_not_reset": "the engine's prefix cache could not be emptied before the run "
                              "(prefix_cache_reset says why), so prompts cached by earlier runs "
                              "may have sped this one up: restart the engine for a clean cache",
    "client_shares_engine_cores": "this client ran on cores of an engine the rig started on this "
                                  "host (client_pinned_by says why), so each took CPU from the "
                                  "other: on a small machine such runs stall; drop --no-pin, or "
                                  "start the engine without --no-pin",
}

# What to do about each kind of failed request (loadtest/results/record.py's ERROR_KINDS),
# printed under the run's summary for the kinds it met.
ERROR_REMEDIES = {
    "connect": "nothing answered at --host: is the engine up, on that port?",
    "timeout": "the engine went silent for --read-timeout seconds: an overloaded or hung engine; "
               "fewer --users, or a longer --read-timeout for long prefills",
    "http_status": "the engine refused the request (its error is in requests.jsonl): check "
                   "--model, --max-tokens and the engine's log",
    "stream_error": "the engine sent an error event mid-stream: see its message in "
                    "requests.jsonl and the engine's log",
    "stream_protocol": "the answer is not the stream --api says (a field of the wrong type, bad "
                       "JSON or UTF-8, an overlong line, no stream at all): check --api, and "
                       "what serves --host (a proxy, a half-compatible server)",
    "truncated": "the stream ended before the engine finished it: the engine or a proxy closed "
                 "the connection (a crash, a restart, a proxy's timeout)",
    "rate_limited": "the endpoint kept answering 429: fewer --users or --rate, or a higher quota",
    "deadline": "the request ran past --request-deadline and was cut: an engine trickling its "
                "answer or streaming without end; raise --request-deadline only if the engine "
                "is truly that slow",
    "over_max_tokens": "the engine streamed far past max_tokens and was cut: it ignores "
                       "max_tokens (check the engine and --api), so its tok/s is not comparable",
}


def error_remedies(errors: str) -> list[str]:
    """`kind: remedy` for each kind in a row's `errors` column ("kind=count;...")."""
    kinds = [item.split("=")[0] for item in errors.split(";") if item]
    return [f"{kind}: {ERROR_REMEDIES[kind]}" for kind in kinds if kind in ERROR_REMEDIES]


def check_run(row: dict[str, Any]) -> list[str]:
    found = []
    if (row.get("client_cpu_max_pct") or 0) > 90:
        found.append("client_cpu_high")
    if row.get("failed"):
        found.append("failed_requests")
    if "chunks" in (row.get("output_tokens_source") or ""):
        found.append("output_tokens_from_chunks")
    low, high = row.get("min_output_tokens"), row.get("max_output_tokens")
    if low is not None and high and (high - low) > 0.1 * high:
        found.append("uneven_output_lengths")
    if not row.get("rate") and row.get("requests", 0) < 2 * row.get("users", 0):  # open loop: a cap
        found.append("too_few_requests")
    if (row.get("completion_time_s") or 0) < 5:
        found.append("short_run")
    if row.get("buffered_requests"):
        found.append("buffered_streams")
    if row.get("reconnects"):
        found.append("reconnects")
    if row.get("rate_limited"):
        found.append("rate_limited")
    if engine_held_peak(row) > row.get("users", 0):
        found.append("engine_shared")
    if row.get("flawed_requests"):
        found.append("engine_flaws")
    if row.get("recount_text_mismatches"):
        found.append("token_text_mismatch")
    if row.get("prompt_tokens_mismatched"):
        found.append("prompt_tokens_mismatch")
    if str(row.get("prefix_cache_reset") or "").startswith("failed"):
        found.append("prefix_cache_not_reset")
    if str(row.get("client_pinned_by") or "").startswith("shared"):
        found.append("client_shares_engine_cores")
    return found
