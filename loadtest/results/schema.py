"""The columns of a runs.csv row: one table, from which everything else is derived.

    COLUMNS        every column a run's row may hold, in the order runs.csv writes them
    COLUMN_NAMES   their names, in that order
    BY_NAME        name -> Column
    text_columns() the columns read as text, never as numbers (type str or bool)
    markdown()     the table of docs/measurement.md (`python -m loadtest.results.docs --write
                   docs/measurement.md` rewrites it there; tests/test_schema.py checks it)

A row holds the columns that apply to its run: the open-loop ones only with --rate, the
conversation ones only for conversations, telemetry's only with --telemetry-interval above 0, and
so on; `meaning` says when. A column's `type` is what its cell holds: `int` and `float` cells are
numbers (empty when unknown), `bool` cells are `True` or `False`, `str` cells are text (lists
joined with `;`). To add a column: add a row here where it belongs and regenerate the docs table.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BY_NAME", "COLUMNS", "COLUMN_NAMES", "Column", "SCHEMA_VERSION", "markdown",
           "text_columns"]

SCHEMA_VERSION = 1  # raised when a column changes meaning; a new column does not raise it


@dataclass(frozen=True)
class Column:
    name: str
    type: type  # str, int, float or bool
    unit: str  # "" for text and plain counts named by their column
    meaning: str  # one line: what fills it, and when it is there


def _latency(metric: str, what: str, stats: tuple[str, ...] = ("mean", "p50", "p90", "p99"),
             when: str = "") -> list[Column]:
    return [Column(f"{metric}_{stat}_ms", float, "ms", f"{what}: {stat}{when}") for stat in stats]


_OPEN = " (open loop, --rate)"
_CONV = " (conversations)"
_TELEMETRY = " (telemetry)"
_REASONING = " (reasoning streams)"
_STRUCTURED = " (structured workload)"

COLUMNS: tuple[Column, ...] = (
    # what ran
    Column("timestamp", str, "UTC", "when the run started, ISO 8601"),
    Column("run_id", str, "", "the run's id: its folder under runs/"),
    Column("engine", str, "", "the engine's slug (servers/)"),
    Column("model", str, "", "the model as the engine served it (--model, else its /v1/models)"),
    Column("host", str, "", "the URL the run was sent to, credentials removed"),
    Column("flags", str, "", "the engine's settings: as told by --flags, else the command the rig started "
           "its engine at --host on this host with, as it ran: the variables that set it up (NAME=VALUE), "
           "then its argv (taskset, the recipe's command with every setting resolved, extra flags), "
           "secrets hidden (flags_from says which)"),
    Column("flags_from", str, "", "where flags came from: --flags (told), started engine (read from "
           "the rig's record of the engine it started), empty when neither"),
    Column("gpu", str, "", "--gpu: the GPUs the engine ran on, as told"),
    Column("users", int, "", "concurrent users (closed loop), the cap on requests in flight (open loop)"),
    Column("processes", int, "", "client processes (Locust workers; 1 without), each on a core of its own (run.json's workers name them)"),
    Column("mode", str, "", "in-process for an engine driven in the rig's process (rig inprocess)"),
    Column("engine_cpus", str, "", "the engine's cores: an in-process engine's, or those of the engine the rig started at --host on this host when the run began (after --processes took any for the client)"),
    # whether to trust it
    Column("verdict", str, "", "valid or invalid (loadtest/results/rules.py)"),
    Column("verdict_reasons", str, "", "why invalid: reason codes joined with ;"),
    # how it went
    Column("requests", int, "", "requests asked for (--requests; sessions in conversations)"),
    Column("requests_sent", int, "", "requests (turns) sent"),
    Column("completed", int, "", "requests answered in full"),
    Column("failed", int, "", "requests that failed (errors says how)"),
    Column("reconnects", int, "", "requests sent again because the server closed a kept-alive connection"),
    Column("rate_limited", int, "", "429 answers waited out and sent again"),
    Column("rate_limited_wait_s", float, "s", "time spent waiting out 429s"),
    Column("completion_time_s", float, "s", "first request sent to last answer done"),
    Column("output_tokens", int, "tokens", "output tokens of completed requests, as the engine reported them"),
    Column("output_chunks", int, "chunks", "output chunks streamed, every request"),
    Column("output_tok_per_s", float, "tok/s", "output_tokens / completion_time_s"),
    Column("req_per_s", float, "req/s", "completed / completion_time_s"),
    Column("avg_output_tokens", float, "tokens", "mean output tokens per completed request"),
    Column("min_output_tokens", int, "tokens", "fewest output tokens of a completed request"),
    Column("max_output_tokens", int, "tokens", "most output tokens of a completed request"),
    Column("output_off_asked_max_pct", float, "%", "--ignore-eos with several output lengths asked "
           "(traces, datasets, agent sessions): the largest miss of a completed request's output "
           "against its own ask, in % of the ask; empty where one length was asked"),
    Column("output_tokens_source", str, "", "where output counts came from (usage, details, chunks), joined with +; "
           "engine_counter:sole_client: the engine's own generated-token counter's change over the run, "
           "assuming the run was its only client (text-generation-webui, whose usage re-tokenizes)"),
    Column("prompt_tokens", int, "tokens", "prompt tokens of completed requests, as the engine reported them"),
    *_latency("ttft", "time to first output chunk, completed requests"),
    *_latency("itl", "gaps between output chunks, pooled over completed requests"),
    *_latency("e2e", "send to last chunk, completed requests"),
    *_latency("tpot", "(e2e - ttft) / (output tokens - 1) per completed request"),
    *_latency("ttft_sched", "TTFT from the scheduled send time", when=_OPEN),
    *_latency("e2e_sched", "e2e from the scheduled send time", when=_OPEN),
    Column("send_lag_p50_ms", float, "ms", "actual send - scheduled send: p50" + _OPEN),
    Column("send_lag_p99_ms", float, "ms", "actual send - scheduled send: p99" + _OPEN),
    Column("send_lag_max_ms", float, "ms", "actual send - scheduled send: max" + _OPEN),
    Column("send_lag_worst_worker_p99_ms", float, "ms", "with several load-generator processes or workers: the largest of each one's own send lag p99 (each one's p50 and p99, with the clock offset it measured against the master, are in run.json's `workers`; empty in one process)" + _OPEN),
    Column("capped_requests", int, "", "requests that found every user busy" + _OPEN),
    Column("cap_wait_p99_ms", float, "ms", "their wait for a free user, p99" + _OPEN),
    Column("scheduled_rate_per_s", float, "req/s", "the schedule's rate over its own span" + _OPEN),
    Column("send_rate_per_s", float, "req/s", "the rate requests were sent" + _OPEN),
    Column("done_rate_per_s", float, "req/s", "the rate answers finished: the achieved rate" + _OPEN),
    Column("rate", float, "req/s", "--rate: the offered rate (sessions/s in conversations)" + _OPEN),
    Column("arrival", str, "", "--arrival: constant, poisson or gamma" + _OPEN),
    Column("arrival_seed", int, "", "--arrival-seed" + _OPEN),
    Column("burstiness", float, "", "--burstiness: gamma's shape (--arrival gamma)"),
    Column("schedule_s", float, "s", "the schedule's last send time" + _OPEN),
    Column("sessions", int, "", "conversations run" + _CONV),
    Column("sessions_complete", int, "", "conversations that ran every turn" + _CONV),
    Column("sessions_context_full", int, "", "conversations ended as they outgrew the context" + _CONV),
    Column("sessions_failed", int, "", "conversations ended by a failed turn" + _CONV),
    Column("turns", int, "", "turns of the longest conversation" + _CONV),
    Column("turns_sent", int, "", "turns sent" + _CONV),
    Column("turns_not_sent", int, "", "turns left unsent by ended conversations" + _CONV),
    Column("context_refused", int, "", "turns the engine refused for length" + _CONV),
    *_latency("ttft_turn1", "TTFT of first turns", ("p50", "p90"), _CONV),
    *_latency("ttft_later", "TTFT of later turns", ("p50", "p90"), _CONV),
    Column("prompt_tokens_turn1_mean", float, "tokens", "mean prompt tokens of first turns" + _CONV),
    Column("prompt_tokens_later_mean", float, "tokens", "mean prompt tokens of later turns" + _CONV),
    # a reasoning model's run (loadtest/results/reasoning.py): only when a request reasoned
    Column("reasoning_requests", int, "", "completed requests whose stream carried reasoning" + _REASONING),
    Column("reasoning_unanswered", int, "", "of those, requests cut before any answer (no TTFA)" + _REASONING),
    Column("reasoning_chunks", int, "chunks", "output chunks that carried reasoning" + _REASONING),
    Column("answer_chunks", int, "chunks", "output chunks that carried answer text or tool calls" + _REASONING),
    Column("reasoning_tokens", int, "tokens", "reasoning tokens as the engine counted them (usage's completion_tokens_details); empty where it did not, for every request that reasoned" + _REASONING),
    Column("answer_tokens", int, "tokens", "output_tokens - reasoning_tokens" + _REASONING),
    Column("reasoning_tokens_source", str, "", "usage, or none: the engine counted no reasoning tokens (or 0 for answers that reasoned), and chunks are no token count" + _REASONING),
    *_latency("ttfa", "time to the first answer chunk (a request that did not reason: its TTFT)", when=_REASONING),
    *_latency("ttfr", "time to the first reasoning chunk", ("p50", "p99"), _REASONING),
    *_latency("reasoning_time", "first to last reasoning chunk", ("p50", "p99"), _REASONING),
    *_latency("switch", "last reasoning chunk to first answer chunk", ("p50", "p99"), _REASONING),
    # constrained answers (--workload structured: loadtest/workload/answers.py)
    Column("constraints", str, "", "--constraints: json, regex, tools, graded or the tasks file" + _STRUCTURED),
    Column("constraints_sha256", str, "", "the tasks file's digest" + _STRUCTURED),
    Column("constraint_kinds", str, "", "json_schema, regex, tools, answer: the kinds of its tasks, joined with +" + _STRUCTURED),
    Column("constrained", bool, "", "--constrain: False for the same prompts sent unconstrained" + _STRUCTURED),
    Column("answers_checked", int, "", "completed requests whose answer was checked" + _STRUCTURED),
    Column("answers_valid", int, "", "answers that parse and fit their schema, regex or declared tools" + _STRUCTURED),
    Column("answers_valid_pct", float, "%", "answers_valid / answers_checked" + _STRUCTURED),
    Column("answer_failures", str, "", "the others by reason (cut, not_json, schema, no_match, no_tool_call, ...): reason=count joined with ;" + _STRUCTURED),
    Column("slo", str, "", "--slo: the latency targets (with --slo)"),
    Column("slo_met_requests", int, "", "requests that met every target (with --slo)"),
    Column("slo_met_pct", float, "%", "their share of the requests sent (with --slo)"),
    Column("goodput_req_per_s", float, "req/s", "their rate over the run (with --slo)"),
    Column("goodput_tok_per_s", float, "tok/s", "their output tokens per second (with --slo)"),
    Column("slo_percentiles", str, "", "met, or missed: and the percentile targets missed (with --slo)"),
    Column("slo_values", str, "", "each target's figure: a percentile's value in ms, a per-request target's share met alone in %, joined with ; (with --slo)"),
    Column("recount", str, "", "--recount: what was checked token by token, off, or why nothing could be"),
    Column("recount_count_mismatches", int, "", "answers whose streamed token ids differ in number from the reported count"),
    Column("recount_text_mismatches", int, "", "answers whose token ids do not decode to the text that arrived"),
    Column("errors", str, "", "failed requests by kind: kind=count joined with ;"),
    Column("warnings", str, "", "warning codes joined with ; (loadtest/results/rules.py)"),
    Column("buffered_requests", int, "", "long answers (16 chunks or more) whose chunks arrived in one burst: all in the last tenth of the answer's end-to-end time, and back to back (median gap under BURST_GAP_MS, loadtest/results/summary.py: a buffer's, not decode steps')"),
    Column("empty_answers", int, "", "completed requests whose stream carried no text (no TTFT: those are over the others)"),
    Column("flawed_requests", int, "", "completed requests the engine answered with values the rig ignored"),
    Column("engine_flaws", str, "", "the first few of those values, in words"),
    Column("prompt_tokens_asked_mean", float, "tokens", "mean prompt tokens the workload built (token-exact sources)"),
    Column("prompt_tokens_reported_mean", float, "tokens", "mean prompt tokens the engine reported for them"),
    Column("prompt_tokens_mismatched", int, "", "requests whose reported prompt tokens differ from the built"),
    Column("prompt_tokens_mismatch_cause", str, "", "the likeliest cause, in words"),
    # a time-bounded run (--duration, --stages; loadtest/client/timing.py)
    Column("duration_s", float, "s", "--duration, or the stages' sum: how long requests were sent"),
    Column("cooldown_s", float, "s", "--cooldown-s: time left out at a timed run's end"),
    Column("timeslice_s", float, "s", "--timeslice-s: the length of run.json's timeslices"),
    Column("stages_file", str, "", "--stages: the stages file (each stage's figures in run.json)"),
    Column("stages", int, "", "how many stages it ran (--stages)"),
    Column("window_start_s", float, "s", "the measurement window's start from the run's (--warmup-s)"),
    Column("window_end_s", float, "s", "its end: duration_s - cooldown_s"),
    Column("window_s", float, "s", "its length"),
    Column("window_sent", int, "", "requests sent in the window"),
    Column("window_completed", int, "", "requests that ended in the window"),
    Column("window_failed", int, "", "requests sent in the window that failed"),
    Column("window_output_tok_per_s", float, "tok/s", "output tokens whose chunks arrived in the window / window_s"),
    Column("window_req_per_s", float, "req/s", "window_completed / window_s"),
    *_latency("window_ttft", "TTFT of requests sent in the window", ("p50", "p90", "p99")),
    *_latency("window_e2e", "e2e of requests sent in the window", ("p50", "p90", "p99")),
    *_latency("window_itl", "chunk gaps of requests sent in the window", ("p50", "p90", "p99")),
    # the workload
    Column("workload", str, "", "the workload's name"),
    Column("workload_sha256", str, "", "digest of the requests' bodies: runs with one may be compared"),
    Column("workload_source", str, "", "prompts, synthetic, prefix, dataset, conversation, trace, agentic or structured"),
    Column("workload_seed", int, "", "--seed of a built workload"),
    Column("input_len", str, "tokens", "--input-len as given"),
    Column("output_len", str, "tokens", "--output-len as given"),
    Column("prefix_groups", int, "", "--prefix-groups (prefix workload)"),
    Column("prefix_len", int, "tokens", "--prefix-len (prefix workload)"),
    Column("think_time_s", float, "s", "--think-time between turns"),
    Column("agentic_sessions", int, "", "agent sessions (trace files) replayed (agentic workload)"),
    Column("agentic_subagents", int, "", "sub-agents whose calls were replayed (agentic workload)"),
    Column("agentic_fanout_max", int, "", "the most sub-agents of one session running at once, as recorded (agentic workload)"),
    Column("agentic_think_time_mean_s", float, "s", "mean recorded think/tool time before a call, where the trace has it (agentic workload)"),
    Column("agentic_shared_blocks_pct", float, "%", "prompt blocks a call shares with an earlier call of its session: the reuse the trace offers (agentic workload)"),
    Column("lora_adapters", int, "", "--lora-adapters: LoRA adapters the requests were spread over (run.json: per-adapter figures)"),
    Column("lora_mix", str, "", "--lora-mix: uniform or zipf:S"),
    Column("tokenizer", str, "", "the tokenizer prompts were built with"),
    Column("tokenizer_sha256", str, "", "its digest"),
    Column("dataset_format", str, "", "the dataset's format (dataset workload)"),
    Column("dataset_sha256", str, "", "the dataset file's digest"),
    Column("dataset_mode", str, "", "--dataset-mode"),
    Column("trace_sha256", str, "", "the trace file's digest (trace workload)"),
    Column("speedup", float, "", "--speedup of the trace's clock"),
    Column("trace_duration_s", float, "s", "the trace's span after --speedup"),
    Column("prompts", str, "", "--prompts: the prompt file"),
    Column("prompts_sha256", str, "", "digest naming the prompts, to compare answers across runs"),
    Column("api", str, "", "--api: completions, chat (or in-process)"),
    Column("max_tokens", int, "tokens", "--max-tokens"),
    Column("ignore_eos", bool, "", "--ignore-eos"),
    Column("temperature", float, "", "--temperature"),
    Column("request_deadline_s", float, "s", "--request-deadline, or its default for --max-tokens"),
    Column("http_read_timeout_s", float, "s", "--read-timeout"),
    Column("keep_outputs", bool, "", "--keep-outputs"),
    Column("outputs_kept", int, "", "answers saved to outputs.jsonl (with --keep-outputs)"),
    Column("repeat", int, "", "--repeat: the repeat's number"),
    Column("tag", str, "", "--tag"),
    Column("warmup", bool, "", "--warmup (such runs get no row: always False here)"),
    Column("warmup_requests", int, "", "warm-up requests before the round (in-process)"),
    Column("warmup_s", float, "s", "--warmup-s: time left out at a timed run's start"),
    Column("engine_version", str, "", "the engine's version, as it reports it"),
    Column("engine_load_s", float, "s", "time the engine took to load (in-process)"),
    Column("engine_warmup_s", float, "s", "time the warm-up before the batch size's first repeat took (in-process)"),
    Column("engine_settings", str, "", "the engine's settings, JSON (in-process)"),
    Column("model_sha256", str, "", "the model's digest, for a local model built here"),
    # the client
    Column("client_cpu_max_pct", float, "% of a core", "the busiest client process's CPU peak"),
    Column("client_cpu_mean_pct", float, "% of a core", "the client's mean CPU (with workers: the busiest process's)"),
    Column("client_runqueue_wait_ms", float, "ms", "time the client's threads were runnable but not running, in the most-starved load-generator process when there are workers (Linux schedstat; empty elsewhere)"),
    Column("client_runqueue_wait_pct", float, "%", "that wait over the run's wall time: the share of it the client was starved"),
    Column("engine_runqueue_wait_ms", float, "ms", "time the threads of the engine's process tree (leader and descendants) were runnable but not running, when the rig started that engine on this host (Linux schedstat; empty elsewhere)"),
    Column("engine_runqueue_wait_pct", float, "%", "that wait over (the run's wall time x the cores the engine may use): 100% means every core it may use had an engine thread waiting all the time; its own threads waiting on each other count too, so it can pass 100%"),
    Column("engine_process_cpu_max_pct", float, "% of a core", "the busiest single process of the engine's process trees (each replica's behind a balancer) over the run: its threads' time on a CPU over the wall time (several busy threads pass 100%), when the rig started the engine on this host (Linux schedstat; empty elsewhere); run.json's engine_processes lists every process from 1%. A GPU worker that spin-waits on its GPU shows a full core too: its name says which"),
    Column("engine_process_cpu_max_name", str, "", "that process's name: /proc's comm, the whole title where the process renamed itself (VLLM::EngineCore), or the interpreter and its module (python -m vllm.entrypoints.openai.api_server)"),
    Column("engine_front_end_cpu_max_pct", float, "% of a core", "the busiest of the engine's API-server processes (its recipe's front_ends: vLLM's and Aphrodite's) over the run, measured as engine_process_cpu_max_pct is; near 100% the front end, not the GPUs, may set the throughput (warning front_end_saturated); empty where the engine names none or the rig did not start it here"),
    Column("clock_sync_error_ms", float, "ms", "with workers: the largest error a worker's times can carry once put on the master's clock (half the shortest round trip of its clock check; empty in one process)"),
    Column("loop_lag_p99_ms", float, "ms", "how late the client's event loop woke, p99 (worst process)"),
    Column("loop_lag_max_ms", float, "ms", "how late it woke at worst"),
    Column("client_cpu_count", int, "cores", "cores the client could run on"),
    Column("client_cpus", str, "", "those cores, as a list"),
    Column("client_pinned_by", str, "", "who chose them: the rig (beside its engine; with the cores --processes took from it), the user, shared, or empty"),
    Column("prefix_cache_reset", str, "", "how the engine's prefix cache was emptied before the run, or failed: why"),
    Column("engine_prefix_cache_hit_pct", float, "%", "prompt tokens served from the prefix cache" + _TELEMETRY),
    Column("engine_prefix_cache_hit_tokens", int, "tokens", "prompt tokens the prefix cache served" + _TELEMETRY),
    Column("engine_prefix_cache_query_tokens", int, "tokens", "prompt tokens looked up in it" + _TELEMETRY),
    Column("engine_spec_accept_pct", float, "%", "draft tokens the target model accepted, of those speculative decoding proposed" + _TELEMETRY),
    Column("engine_spec_drafted_tokens", int, "tokens", "draft tokens proposed" + _TELEMETRY),
    Column("engine_spec_accepted_tokens", int, "tokens", "draft tokens accepted" + _TELEMETRY),
    # telemetry (--telemetry-interval above 0)
    Column("telemetry_gpu", str, "", "GPU sampling: sampled, absent, not_sampled or failed"),
    Column("telemetry_engine", str, "", "/metrics sampling: sampled, absent, not_sampled, failed or "
           "gauges_read_zero (loadtest/telemetry/gauges.py: ENGINE_STATES)"),
    Column("telemetry_window_s", float, "s", "first to last sample" + _TELEMETRY),
    Column("gpu_count", int, "", "GPUs sampled" + _TELEMETRY),
    Column("gpu_names", str, "", "their names" + _TELEMETRY),
    Column("gpu_mem_peak_mib", float, "MiB", "highest memory in use, all GPUs at one sample" + _TELEMETRY),
    Column("gpu_util_mean_pct", float, "%", "mean utilization" + _TELEMETRY),
    Column("gpu_power_mean_w", float, "W", "mean power, all GPUs" + _TELEMETRY),
    Column("gpu_energy_j", float, "J", "energy over the run" + _TELEMETRY),
    Column("gpu_energy_source", str, "", "nvml_energy_counter or power_integral" + _TELEMETRY),
    Column("gpu_j_per_output_token", float, "J/token", "gpu_energy_j / output_tokens" + _TELEMETRY),
    Column("engine_running_peak", float, "requests", "most requests the engine ran at one scrape" + _TELEMETRY),
    Column("engine_waiting_peak", float, "requests", "most requests it queued at one scrape" + _TELEMETRY),
    Column("engine_held_peak", float, "requests", "most running + waiting at one scrape" + _TELEMETRY),
    Column("engine_kv_cache_peak_pct", float, "%", "highest KV cache use" + _TELEMETRY),
    Column("engine_queue_time_mean_ms", float, "ms", "the engine's own mean queue time" + _TELEMETRY),
    Column("engine_queue_time_count", int, "", "requests in that mean" + _TELEMETRY),
    Column("engine_ttft_mean_ms", float, "ms", "the engine's own mean TTFT" + _TELEMETRY),
    Column("engine_ttft_count", int, "", "requests in that mean" + _TELEMETRY),
    Column("engine_e2e_mean_ms", float, "ms", "the engine's own mean e2e latency" + _TELEMETRY),
    Column("engine_e2e_count", int, "", "requests in that mean" + _TELEMETRY),
    # who measured
    Column("client_cpu_model", str, "", "the client machine's CPU model"),
    Column("client_hostname", str, "", "the client machine's hostname"),
    Column("locust_version", str, "", "Locust's version"),
    Column("python_version", str, "", "Python's version"),
    Column("rig_version", str, "", "the package version and git commit (.dirty: tracked files changed)"),
    Column("schema_version", int, "", "this table's version (SCHEMA_VERSION)"),
    Column("run_dir", str, "", "the run's folder when it ran"),
    # graded answers (--workload structured --constraints graded: loadtest/workload/answers.py)
    Column("answers_graded", int, "", "completed requests whose answer was graded against its task's one right answer" + _STRUCTURED),
    Column("answers_correct", int, "", "of those, answers that are the task's answer (answers.py: case and all, less wrapping quotes and a final period)" + _STRUCTURED),
    Column("answers_correct_pct", float, "%", "answers_correct / answers_graded" + _STRUCTURED),
    Column("answers_wrong", str, "", "the tasks answered wrong or cut at max_tokens: id (id=count where asked more than once) joined with ;, the first 40 then +N more" + _STRUCTURED),
)

COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}


def text_columns() -> set[str]:
    """Columns read as text: their cells are never turned into numbers."""
    return {c.name for c in COLUMNS if c.type in (str, bool)}


def markdown() -> str:
    """The docs' table of every column (docs/measurement.md; loadtest/results/docs.py writes it)."""
    lines = ["| column | type | unit | what fills it |", "|---|---|---|---|"]
    lines += [f"| `{c.name}` | {c.type.__name__} | {c.unit} | {c.meaning} |" for c in COLUMNS]
    return "\n".join(lines)
