"""Agentic trace replay (loadtest/workload/agentic.py) on small files in the Weka agent trace
format (tests/data/agentic/): every call at its recorded time, sub-agents beside their parent,
shared blocks within a session and not across, bad files one line. One test replays them on
vLLM CPU (marked engine)."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadtest.workload import WorkloadError, build_workload, workload_options
from loadtest.report.groups import groups_markdown
from loadtest.results.record import RequestRecord
from loadtest.workload.agentic import agent_figures, read_session
from loadtest.workload.build import workload_sha256
from servers.vllm_cpu import TINY_MODEL
from rig_helpers import needs_tiny_model

DATA = Path(__file__).resolve().parent / "data" / "agentic"


def _build(trace: Path = DATA, requests: int = 9, **given: str):
    options = workload_options(SimpleNamespace(workload="agentic", trace=str(trace),
                                               tokenizer=str(TINY_MODEL), **given))
    return build_workload("mixed", requests, api="completions", model="tiny-llama",
                          max_tokens=8, source=options), options


def _prompt(spec) -> str:
    return json.loads(spec.body)["prompt"]


@needs_tiny_model
def test_every_call_is_sent_at_its_recorded_time_with_its_agent_named():
    workload, options = _build(speedup="2")
    assert workload.source == "agentic" and workload.name == "agentic-x2-9"
    assert [s.prompt_id for s in workload.specs] == [
        "sess-a/main/1", "sess-b/main/1", "sess-a/agent_001/1", "sess-a/agent_002/1",
        "sess-a/agent_001/2", "sess-a/main/2", "sess-b/agent_009/1", "sess-b/agent_009/2",
        "sess-b/main/2"]
    # sess-b's sub-agent times are offsets from its spawn at 2.0 s; --speedup 2 halves all
    assert [ns / 1e9 for ns in workload.schedule_ns] == [0, 0.1, 0.35, 0.4, 0.6, 0.8, 1.05,
                                                         1.25, 1.5]
    assert [s.prompt_tokens for s in workload.specs] == [40, 30, 36, 34, 52, 72, 33, 49, 66]
    columns = workload.columns
    assert (columns["agentic_sessions"], columns["agentic_subagents"],
            columns["agentic_fanout_max"]) == (2, 3, 2)
    assert columns["agentic_think_time_mean_s"] == round(1.6 / 7, 3)
    assert columns["agentic_shared_blocks_pct"] == round(100 * 13 / 27, 2)
    assert workload.sha256 == workload_sha256("mixed", 9, max_tokens=8, source=options)
    first, _ = _build(requests=3)
    assert [s.prompt_id for s in first.specs] == [s.prompt_id for s in workload.specs][:3]


def _common(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


@needs_tiny_model
def test_shared_context_within_a_session_and_not_across():
    """Blocks [1, 2] (32 tokens) open sess-a's calls and sess-b's first: the same text within
    sess-a, another text in sess-b (one namespace per file)."""
    workload, _ = _build()
    text = {s.prompt_id: _prompt(s) for s in workload.specs}
    a_main = text["sess-a/main/1"]
    within = _common(a_main, text["sess-a/agent_001/1"])
    assert within > 60 and _common(a_main, text["sess-a/main/2"]) == within
    assert _common(a_main, text["sess-b/main/1"]) < 20


@needs_tiny_model
def test_a_single_file_and_too_many_requests():
    workload, _ = _build(DATA / "session_b.json", requests=4)
    assert [s.prompt_id.split("/")[0] for s in workload.specs] == ["sess-b"] * 4
    with pytest.raises(WorkloadError, match="4 calls in the trace, fewer than --requests 5"):
        _build(DATA / "session_b.json", requests=5)
    with pytest.raises(WorkloadError, match="--rate and --workload agentic both set"):
        workload_options(SimpleNamespace(workload="agentic", trace=str(DATA), rate="2"))
    with pytest.raises(WorkloadError, match="--workload agentic needs --trace FILE"):
        workload_options(SimpleNamespace(workload="agentic"))


def test_main_agents_and_sub_agents_are_figured_apart():
    def record(i: int, prompt_id: str, lag_ms: int) -> RequestRecord:
        return RequestRecord(i, prompt_id, 0.0, lag_ms * 1_000_000,
                             first_chunk_ns=(lag_ms + 10) * 1_000_000, done_ns=10**9,
                             output_tokens=4, scheduled_ns=0)

    records = [record(0, "s/main/1", 0), record(1, "s/agent_1/1", 100),
               record(2, "s/agent_2/1", 300), record(3, "s/main/2", 0)]
    figures = agent_figures("agentic", records, 2.0)
    assert {k: v["requests"] for k, v in figures.items()} == {"main agents": 2, "sub-agents": 2}
    assert figures["sub-agents"]["ttft_sched_p99_ms"] > figures["main agents"]["ttft_sched_p99_ms"]
    assert figures["main agents"]["output_tok_per_s"] == 4.0
    assert agent_figures("trace", records, 2.0) == {}
    assert "| TTFT p99 from schedule (ms) |" in groups_markdown(figures, "agent")


VALID = json.loads((DATA / "session_a.json").read_text())


@needs_tiny_model
@pytest.mark.parametrize("change, message", [
    (lambda t: t.pop("block_size"), '"block_size" must be a whole number'),
    (lambda t: t.update(hash_id_scope="global"), 'only "hash_id_scope": "local"'),
    (lambda t: t["requests"][0].update(type="x"), 'requests[0]: "type" must be'),
    (lambda t: t["requests"][0].update({"in": 0}), 'requests[0]: "in" must be a whole number'),
    (lambda t: t["requests"][3].update(t=-1), 'requests[3]: "t" must be a number of seconds'),
    (lambda t: t["requests"][1]["requests"][1].update(hash_ids=[1, "x"]),
     'requests[1].requests[1]: "hash_ids" must be'),
    (lambda t: t["requests"][2].pop("agent_id"), 'requests[2]: a sub-agent needs an "agent_id"'),
    (lambda t: t.update(requests=[]), "no API calls in the trace"),
])
def test_a_bad_trace_is_one_line_naming_where(change, message, tmp_path: Path):
    trace = copy.deepcopy(VALID)
    change(trace)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(trace))
    with pytest.raises(WorkloadError) as error:
        _build(path, requests=1)
    assert message in str(error.value) and str(error.value).startswith(str(path))
    assert "\n" not in str(error.value)


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 2**41) | st.floats() |
                     st.text(max_size=4), lambda inner: st.lists(inner, max_size=3) |
                     st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from([(), ("requests", 0), ("requests", 1), ("requests", 1, "requests", 0)]),
       key=st.sampled_from(["t", "type", "in", "out", "hash_ids", "think_time", "agent_id",
                            "requests", "block_size", "id"]),
       value=_JSON)
def test_any_value_anywhere_is_read_or_refused_in_one_line(path, key, value):
    trace = copy.deepcopy(VALID)
    node = trace
    for step in path:
        node = node[step]
    node[key] = value
    try:
        session = read_session(json.dumps(trace).encode(), "gen.json", 2)
    except WorkloadError as exc:
        assert str(exc).startswith("gen.json") and "\n" not in str(exc)
        return
    assert session.calls and all(c.inputs >= 2 and c.outputs >= 1 for c in session.calls)


@pytest.mark.engine
def test_vllm_replays_the_agent_sessions_on_their_schedule(engine_url: str, tmp_path: Path):
    from rig_helpers import run_locust

    result = run_locust("--engine", "vllm-cpu", "--host", engine_url, "--users", "9",
                        "--requests", "9", "--workload", "agentic", "--trace", str(DATA),
                        "--ignore-eos", "--telemetry-interval", "0", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    with (tmp_path / "runs.csv").open() as file:
        [row] = list(csv.DictReader(file))
    assert (row["workload_source"], row["agentic_sessions"], row["agentic_subagents"]) == (
        "agentic", "2", "3")
    assert int(row["prompt_tokens_mismatched"]) == 0, row.get("prompt_tokens_mismatch_cause")
    assert row["ttft_sched_p50_ms"] and float(row["trace_duration_s"]) == 3.0
    # each call asked its own length (1-8 tokens) and got it: not unequal work
    assert float(row["output_off_asked_max_pct"]) == 0.0
    assert "unequal_work" not in row["verdict_reasons"], row["verdict_reasons"]
    [run] = list((tmp_path / "runs").iterdir())
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    assert sorted(r["prompt_id"] for r in records)[0] == "sess-a/agent_001/1"
    assert sum(r["output_tokens"] for r in records) == 8 + 6 + 6 + 4 + 8 + 5 + 4 + 1 + 6
    agents = json.loads((run / "run.json").read_text())["agents"]
    assert {k: v["requests"] for k, v in agents.items()} == {"main agents": 4, "sub-agents": 5}
