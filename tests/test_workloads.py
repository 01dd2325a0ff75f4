"""Workload sources (loadtest/workload/): each source, each dataset format, the name and hash,
and bad input refused in one line. Fast: no engine; files are built here in each format."""

from __future__ import annotations

import json
import string
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from loadtest.workload import WorkloadError, build_workload, workload_options
from loadtest.workload.lengths import parse_lengths
from loadtest.workload.usage import prompt_token_columns
from rig_helpers import REPO, first_through_the_process, needs_tiny_model

MODEL = REPO / "models" / "tiny-llama"
needs_model = needs_tiny_model
_fast = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def options(**given: str) -> SimpleNamespace:
    return SimpleNamespace(**given)


def build(requests: int = 8, api: str = "completions", max_tokens: int = 16, **given: str):
    return build_workload("mixed", requests, api=api, model="tiny-llama", max_tokens=max_tokens,
                          source=workload_options(options(**given)), model_dir=str(MODEL))


def bodies(workload) -> list[dict]:
    return [json.loads(spec.body) for spec in workload.specs]


def tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(MODEL / "tokenizer.json"))


def count(text: str) -> int:
    return len(tokenizer().encode(text, add_special_tokens=True).ids)


# --- lengths ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, low, high", [("128", 128, 128), ("64-256", 64, 256),
                                             ("normal:512,64,256-768", 256, 768)])
def test_each_length_grammar_draws_within_its_bounds(text: str, low: int, high: int):
    import numpy as np
    drawn = parse_lengths(text, "--input-len").draw(np.random.default_rng(0), 2000)
    assert drawn.min() >= low and drawn.max() <= high


def test_a_histogram_file_draws_only_its_lengths_in_proportion(tmp_path: Path):
    import numpy as np
    hist = tmp_path / "lengths.csv"
    hist.write_text("length,weight\n100,3\n400,1\n")
    drawn = parse_lengths(f"hist:{hist}", "--input-len").draw(np.random.default_rng(1), 4000)
    assert set(drawn.tolist()) == {100, 400}
    assert 0.7 < (drawn == 100).mean() < 0.8


@given(st.text(alphabet=string.printable, max_size=20).filter(
    lambda t: not t.strip().isdigit() or int(t.strip()) == 0 or int(t.strip()) > 1 << 20))
@_fast
def test_malformed_lengths_are_one_line_errors(text: str):
    if text.strip().startswith("hist:"):
        return  # a file name: its own test
    try:
        parse_lengths(text, "--input-len")
    except WorkloadError as exc:
        assert "\n" not in str(exc) and "--input-len" in str(exc)


@pytest.mark.parametrize("text", ["0", "10-5", "normal:100,10,200-300", "normal:x,1", "-5",
                                  "hist:/nonexistent.csv", "1-99999999"])
def test_impossible_lengths_are_refused(text: str):
    with pytest.raises(WorkloadError, match="--input-len"):
        parse_lengths(text, "--input-len")


def test_a_malformed_histogram_row_names_its_line(tmp_path: Path):
    hist = tmp_path / "h.csv"
    hist.write_text("length,weight\n100,1\nabc,2\n")
    with pytest.raises(WorkloadError, match=r"h.csv:3"):
        parse_lengths(f"hist:{hist}", "--output-len")


# --- synthetic ----------------------------------------------------------------------------------

@needs_model
def test_synthetic_prompts_are_exactly_the_drawn_token_counts():
    workload = build(64, workload="synthetic", input_len="5-300", output_len="8-32")
    for spec, body in zip(workload.specs, bodies(workload)):
        assert count(body["prompt"]) == spec.prompt_tokens
        assert 5 <= spec.prompt_tokens <= 300 and 8 <= body["max_tokens"] <= 32
    assert workload.source == "synthetic" and workload.name == "synthetic-5-300x8-32-64"
    assert workload.columns["input_len"] == "5-300" and workload.columns["output_len"] == "8-32"


@needs_model
def test_the_same_seed_gives_the_same_workload_and_another_seed_another():
    first, again = build(workload="synthetic", input_len="100"), build(workload="synthetic", input_len="100")
    other = build(workload="synthetic", input_len="100", seed="7")
    assert first.sha256 == again.sha256 and bodies(first) == bodies(again)
    assert other.sha256 != first.sha256 and bodies(other) != bodies(first)
    assert build(workload="synthetic", input_len="101").sha256 != first.sha256


@needs_model
def test_output_length_defaults_to_max_tokens():
    workload = build(4, max_tokens=24, workload="synthetic", input_len="50")
    assert {b["max_tokens"] for b in bodies(workload)} == {24}
    assert workload.name == "synthetic-50x24-4"


@needs_model
def test_a_model_named_by_alias_finds_the_rigs_own_model_folder():
    from loadtest.workload.tokens import find_tokenizer
    assert find_tokenizer("", "tiny-llama") == (MODEL / "tokenizer.json").resolve()


def test_a_missing_tokenizer_is_one_line(tmp_path: Path):
    with pytest.raises(WorkloadError, match="is no local folder holding tokenizer.json"):
        build_workload("mixed", 4, api="completions", model="m", max_tokens=8,
                       source=workload_options(options(workload="synthetic")), model_dir=str(tmp_path))
    with pytest.raises(WorkloadError, match="pass --tokenizer"):
        build_workload("mixed", 4, api="completions", model="m", max_tokens=8,
                       source=workload_options(options(workload="synthetic")), model_dir="")


def test_a_file_that_is_no_tokenizer_is_one_line(tmp_path: Path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"not": "a tokenizer"}')
    with pytest.raises(WorkloadError, match="not a tokenizer file"):
        build_workload("mixed", 4, api="completions", model="m", max_tokens=8,
                       source=workload_options(options(workload="synthetic", tokenizer=str(tmp_path))))


# --- shared prefixes ----------------------------------------------------------------------------

@needs_model
def test_prefix_groups_interleave_and_share_exact_prefixes():
    workload = build(12, workload="prefix", prefix_groups="3", prefix_len="40", input_len="10")
    prompts = [b["prompt"] for b in bodies(workload)]
    tok = tokenizer()
    prefix_of = [tok.decode(tok.encode(p).ids[:40]) for p in prompts]
    for i, prefix in enumerate(prefix_of):
        assert prefix == prefix_of[i % 3]  # request i in group i mod G
        assert count(prompts[i]) == 50 == workload.specs[i].prompt_tokens
    assert len(set(prefix_of)) == 3 and len(set(prompts)) == 12
    assert workload.columns["prefix_groups"] == 3 and workload.columns["prefix_len"] == 40
    assert workload.name == "prefix-3x40+10x16-12"


# --- datasets -----------------------------------------------------------------------------------

SHAREGPT = [
    {"id": "a", "conversations": [{"from": "system", "value": "Be brief."},
                                  {"from": "human", "value": "What is a cat?"},
                                  {"from": "gpt", "value": "An animal."},
                                  {"from": "human", "value": "And a dog?"}]},
    {"id": "b", "conversations": [{"from": "gpt", "value": "no human turn: skipped"}]},
    {"id": "c", "conversations": [{"from": "human", "value": "Tell me a story about the sea."}]},
]


def write_formats(folder: Path) -> dict[str, Path]:
    """The same prompts in every format the dataset source reads."""
    import pandas as pd
    files = {"sharegpt": folder / "share.json", "openai": folder / "chat.jsonl",
             "prompts": folder / "prompts.jsonl", "csv": folder / "table.csv",
             "parquet": folder / "table.parquet"}
    files["sharegpt"].write_text(json.dumps(SHAREGPT))
    files["openai"].write_text("\n".join(json.dumps({"messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]})
        for text in ("What is a cat?", "Tell me a story about the sea.")) + "\n")
    files["prompts"].write_text('{"prompt": "What is a cat?"}\n{"prompt": "Tell me a story about the sea."}\n')
    frame = pd.DataFrame({"question": ["What is a cat?", "Tell me a story about the sea."], "n": [5, 7]})
    frame.to_csv(files["csv"], index=False)
    frame.to_parquet(files["parquet"])
    return files


@pytest.mark.parametrize("fmt", ["sharegpt", "openai", "prompts", "csv", "parquet"])
def test_each_dataset_format_gives_its_first_turns(fmt: str, tmp_path: Path):
    path = write_formats(tmp_path)[fmt]
    columns = "prompt=question" if fmt in ("csv", "parquet") else ""
    workload = build(6, workload="dataset", dataset=str(path), columns=columns)
    prompts = [b["prompt"] for b in bodies(workload)]
    assert set(prompts) == {"What is a cat?", "Tell me a story about the sea."}
    assert len(prompts) == 6 and workload.columns["dataset_format"] == fmt
    assert workload.source == "dataset" and len(workload.columns["dataset_sha256"]) == 64


@pytest.mark.parametrize("fmt", ["openai", "prompts"])
def test_jsonl_lines_end_at_newline_alone(fmt: str, tmp_path: Path):
    """JSON allows U+2028, U+0085 and friends raw inside a string, and a CR before a newline:
    each is one line's text, never a line break (str.splitlines() broke there)."""
    texts = ["a\u2028b", "c\x85d\x1ce", "f\u2029g"]
    path = tmp_path / "data.jsonl"
    lines = [json.dumps({"messages": [{"role": "user", "content": t}]} if fmt == "openai"
                        else {"prompt": t}, ensure_ascii=False) for t in texts]
    path.write_bytes("\r\n".join(lines[:2]).encode() + b"\n" + lines[2].encode() + b"\n")
    workload = build(3, workload="dataset", dataset=str(path), dataset_format=fmt)
    assert [b["prompt"] for b in bodies(workload)] == texts
    path.write_bytes(b"\r\n".join([lines[0].encode(), b"\r{", lines[1].encode()]))
    with pytest.raises(WorkloadError, match=r"data\.jsonl:2: not valid JSON"):
        build(3, workload="dataset", dataset=str(path), dataset_format=fmt)


def test_an_output_column_sets_each_rows_output_length(tmp_path: Path):
    path = write_formats(tmp_path)["csv"]
    workload = build(2, workload="dataset", dataset=str(path), columns="prompt=question,output=n")
    assert {(b["prompt"], b["max_tokens"]) for b in bodies(workload)} == {
        ("What is a cat?", 5), ("Tell me a story about the sea.", 7)}


@needs_model
def test_length_filters_drop_prompts_by_token_count(tmp_path: Path):
    path = write_formats(tmp_path)["sharegpt"]
    workload = build(4, workload="dataset", dataset=str(path), min_input_len="8")
    assert {b["prompt"] for b in bodies(workload)} == {"Tell me a story about the sea."}
    with pytest.raises(WorkloadError, match="no prompt within"):
        build(4, workload="dataset", dataset=str(path), min_input_len="500")


def test_whole_conversations_become_sessions(tmp_path: Path):
    path = write_formats(tmp_path)["sharegpt"]
    workload = build(4, workload="dataset", dataset=str(path), dataset_mode="conversation",
                     think_time="1.5")
    assert workload.specs == [] and len(workload.sessions) == 4
    by_id = {s.conversation_id: s for s in workload.sessions}
    assert [t.user for t in by_id["a"].turns] == ["What is a cat?", "And a dog?"]
    assert by_id["a"].system == "Be brief." and by_id["a"].turns[1].think_time_s == 1.5
    assert by_id["a"].turns[0].think_time_s == 0


@pytest.mark.parametrize("content, message", [
    ('[{"conversations": [{"from": "robot", "value": "x"}]}]', "entry 1: each turn is"),
    ('[{"conversations": "x"}]', "entry 1: a ShareGPT entry is"),
    ('[{"id": 1,\n "conversations": [}]', ":2: not valid JSON"),
])
def test_a_malformed_sharegpt_file_is_one_line(tmp_path: Path, content: str, message: str):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(WorkloadError, match=message):
        build(2, workload="dataset", dataset=str(path))


def test_a_malformed_chat_line_names_its_line_number(tmp_path: Path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n'
                    '{"messages": [{"role": "user", "content": 3}]}\n')
    with pytest.raises(WorkloadError, match=r"bad.jsonl:2: each message is"):
        build(2, workload="dataset", dataset=str(path))


def test_a_column_mapping_naming_a_missing_column_is_refused(tmp_path: Path):
    path = write_formats(tmp_path)["parquet"]
    with pytest.raises(WorkloadError, match="question|nope"):
        build(2, workload="dataset", dataset=str(path), columns="prompt=nope")
    csv_path = write_formats(tmp_path)["csv"]
    with pytest.raises(WorkloadError, match="needs --columns"):
        build(2, workload="dataset", dataset=str(csv_path))


def test_an_unknown_format_is_refused(tmp_path: Path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"text": "what format is this?"}\n')
    with pytest.raises(WorkloadError, match="cannot tell its format"):
        build(2, workload="dataset", dataset=str(path))
    with pytest.raises(WorkloadError, match="--dataset-format 'yaml'"):
        workload_options(options(workload="dataset", dataset=str(path), dataset_format="yaml"))


# --- trace --------------------------------------------------------------------------------------

def write_trace(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


TRACE = [{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, 2]},
         {"timestamp": 500, "input_length": 700, "output_length": 20, "hash_ids": [1, 3]},
         {"timestamp": 1500, "input_length": 100, "output_length": 5, "hash_ids": [9]}]


@needs_model
def test_a_trace_replays_its_lengths_shared_blocks_and_schedule(tmp_path: Path):
    trace = write_trace(tmp_path / "mooncake.jsonl", TRACE)
    workload = build(3, workload="trace", trace=str(trace), speedup="2")
    prompts = [b["prompt"] for b in bodies(workload)]
    assert [count(p) for p in prompts] == [600, 700, 100]
    assert [b["max_tokens"] for b in bodies(workload)] == [10, 20, 5]
    tok = tokenizer()
    first, second = tok.encode(prompts[0]).ids, tok.encode(prompts[1]).ids
    assert first[:512] == second[:512] and first[512:600] != second[512:600]  # block 1 shared
    assert workload.schedule_ns == [0, 250_000_000, 750_000_000]  # ms / speedup, in ns
    assert workload.columns["speedup"] == 2.0 and len(workload.columns["trace_sha256"]) == 64
    assert workload.longest == ("t1", 700, 20) and workload.name == "mooncake-x2-3"


@needs_model
def test_a_trace_builds_bodies_lazily_and_alike_on_every_take(tmp_path: Path):
    trace = write_trace(tmp_path / "t.jsonl", TRACE)
    workload = build(2, workload="trace", trace=str(trace))
    assert not isinstance(workload.specs, list)
    assert workload.specs[1].body == workload.specs[1].body and len(workload.specs) == 2
    # the asks a lazy source gives without a body are the bodies' own (asked_lengths.py)
    from loadtest.client.bounds import requested_tokens
    assert [workload.specs.output_asked(i) for i in range(2)] == [
        requested_tokens(spec.body) for spec in workload.specs] == [10, 20]


@pytest.mark.parametrize("row, message", [
    ({"timestamp": -1, "input_length": 10, "output_length": 1}, "timestamp"),
    ({"timestamp": 1, "input_length": 0, "output_length": 1}, "input_length"),
    ({"timestamp": 1, "input_length": 10, "output_length": "5"}, "output_length"),
    ({"timestamp": 1, "input_length": 10, "output_length": 5, "hash_ids": [-1]}, "hash_ids"),
    ("not json", "not valid JSON"),
])
@needs_model
def test_a_malformed_trace_line_names_its_line_number(tmp_path: Path, row, message: str):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(TRACE[0]) + "\n" + (row if isinstance(row, str) else json.dumps(row)) + "\n")
    with pytest.raises(WorkloadError, match=rf"t.jsonl:2: .*{message}"):
        build(2, workload="trace", trace=str(path))


@needs_model
def test_a_trace_out_of_order_or_too_short_is_refused(tmp_path: Path):
    path = write_trace(tmp_path / "t.jsonl", [TRACE[1], TRACE[0]])
    with pytest.raises(WorkloadError, match="t.jsonl:2: timestamp"):
        build(2, workload="trace", trace=str(path))
    with pytest.raises(WorkloadError, match="2 requests in the trace, fewer than --requests 5"):
        build(5, workload="trace", trace=str(write_trace(tmp_path / "s.jsonl", TRACE[:2])))


@given(st.one_of(st.floats(max_value=0), st.text(max_size=8)).map(str))
@_fast
def test_speedup_must_be_positive(value: str):
    if not value.strip():
        return  # empty: the default, 1
    try:
        number = float(value)
        if 0 < number <= 1e6:
            return
    except ValueError:
        pass
    with pytest.raises(WorkloadError, match="--speedup"):
        workload_options(options(workload="trace", trace="t.jsonl", speedup=value))


def test_rate_beside_a_trace_is_refused():
    with pytest.raises(WorkloadError, match="--rate and --workload trace"):
        workload_options(options(workload="trace", trace="t.jsonl", rate="5"))


# --- conversations ------------------------------------------------------------------------------

@needs_model
def test_synthetic_conversations_have_their_turns_lengths_and_think_time():
    workload = build(3, workload="conversation", turns="4", input_len="20", output_len="8",
                     think_time="0.5")
    assert len(workload.sessions) == 3 and workload.specs == []
    for session in workload.sessions:
        assert len(session.turns) == 4
        assert [t.think_time_s for t in session.turns] == [0, 0.5, 0.5, 0.5]
        assert all(count(t.user) == 20 == t.prompt_tokens and t.max_tokens == 8 for t in session.turns)
    assert workload.name == "conv-4t-20x8-think0.5s-3" and workload.columns["turns"] == 4


# --- options, names, hashes ---------------------------------------------------------------------

def test_the_prompt_set_keeps_its_name_and_hash():
    workload = build_workload("mixed", 4, api="completions", model="m", max_tokens=16)
    assert workload.name == "mixed-4x16" and workload.source == "prompts"
    assert workload.sha256 == build_workload("mixed", 4, api="chat", model="x", max_tokens=16).sha256


@pytest.mark.parametrize("given, message", [
    ({"workload": "bogus"}, "--workload 'bogus'"),
    ({"workload": "dataset"}, "needs --dataset"),
    ({"workload": "trace"}, "needs --trace"),
    ({"workload": "synthetic", "trace": "t.jsonl"}, "--trace is for --workload trace"),
    ({"columns": "prompt"}, "--columns"),
    ({"columns": "output=n"}, "name the prompt column"),
    ({"prefix_groups": "0"}, "--prefix-groups"),
    ({"turns": "x"}, "--turns"),
    ({"think_time": "-1"}, "--think-time"),
    ({"seed": "1.5"}, "--seed"),
    ({"dataset_mode": "all"}, "--dataset-mode"),
    ({"min_input_len": "9", "max_input_len": "3"}, "--min-input-len"),
])
def test_bad_workload_options_are_one_line(given: dict, message: str):
    with pytest.raises(WorkloadError, match=message) as caught:
        workload_options(options(**given))
    assert "\n" not in str(caught.value)


@given(name=st.sampled_from(["prefix_groups", "prefix_len", "turns", "seed", "min_input_len"]),
       value=st.text(max_size=10).filter(lambda t: not t.strip().isdigit()))
@_fast
def test_whole_number_options_refuse_anything_else(name: str, value: str):
    if not value.strip() and name in ("min_input_len", "seed"):
        return  # empty: the default
    if not value.strip():
        return
    with pytest.raises(WorkloadError):
        workload_options(options(**{name: value}))


def test_asked_and_reported_prompt_tokens_name_the_cause_of_a_mismatch():
    from loadtest.workload.spec import RequestSpec, Workload
    specs = [RequestSpec(i, str(i), "/v1/completions", b"{}", 100) for i in range(4)]
    workload = Workload("w", specs, "sha")
    record = lambda i, n: SimpleNamespace(request_id=i, prompt_tokens=n)  # noqa: E731
    exact = prompt_token_columns(workload, [record(i, 100) for i in range(4)], "completions")
    assert exact["prompt_tokens_mismatched"] == 0 and "prompt_tokens_mismatch_cause" not in exact
    bos = prompt_token_columns(workload, [record(i, 101) for i in range(4)], "completions")
    assert bos["prompt_tokens_mismatched"] == 4 and "BOS" in bos["prompt_tokens_mismatch_cause"]
    chat = prompt_token_columns(workload, [record(i, 112) for i in range(4)], "chat")
    assert "chat template" in chat["prompt_tokens_mismatch_cause"]
    other = prompt_token_columns(workload, [record(0, 100), record(1, 130), record(2, 90)], "completions")
    assert other["prompt_tokens_mismatched"] == 2 and "tokenizer" in other["prompt_tokens_mismatch_cause"]
    assert other["prompt_tokens_asked_mean"] == 100 and other["prompt_tokens_reported_mean"] == 106.67


@pytest.mark.parametrize("args, message, locust", first_through_the_process([
    (("--workload", "nope"), "--workload 'nope'"),
    (("--workload", "synthetic", "--input-len", "10-5"), "--input-len '10-5'"),
    (("--workload", "trace", "--trace", "t.jsonl", "--speedup", "0"), "--speedup must be a positive"),
    (("--workload", "trace", "--trace", "t.jsonl", "--rate", "3"), "--rate and --workload trace"),
]))
def test_the_locustfile_refuses_bad_workload_options_in_one_line(args: tuple[str, ...], message: str,
                                                                 locust, tmp_path: Path):
    result = locust("--out", str(tmp_path / "out"), *args)
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()  # nothing written


@needs_model
@pytest.mark.parametrize("given", [{"workload": "synthetic", "input_len": "30-60"},
                                   {"workload": "prefix", "prefix_len": "40", "input_len": "9"},
                                   {"workload": "conversation", "turns": "2"},
                                   {"workload": "trace"}, {"workload": "dataset"}])
def test_the_hash_is_known_without_building(given: dict, tmp_path: Path):
    from loadtest.workload.build import workload_sha256
    if given["workload"] == "trace":
        given["trace"] = str(write_trace(tmp_path / "t.jsonl", TRACE))
    if given["workload"] == "dataset":
        given["dataset"] = str(write_formats(tmp_path)["openai"])
    built = build(3, **given)
    assert built.sha256 == workload_sha256("mixed", 3, max_tokens=16,
                                           source=workload_options(options(**given)))


@needs_model
def test_in_process_runs_send_the_server_runs_prompts():
    from loadtest.inprocess.runner import _requests
    given = {"workload": "synthetic", "input_len": "10-40", "output_len": "5-9"}
    workload = build(6, **given)
    run = SimpleNamespace(source=workload_options(options(**given)), prompts="mixed", max_tokens=16)
    assert [(r["text"], r["max_tokens"]) for r in _requests(workload, run)] == [
        (b["prompt"], b["max_tokens"]) for b in bodies(workload)]


_OPTION_NAMES = ["workload", "input_len", "output_len", "dataset_format", "columns", "dataset_mode",
                 "min_input_len", "max_input_len", "prefix_groups", "prefix_len", "turns",
                 "think_time", "speedup", "seed"]


@given(name=st.sampled_from(_OPTION_NAMES), value=st.text(max_size=24))
@_fast
def test_any_value_of_any_option_is_taken_or_refused_in_one_line(name: str, value: str):
    try:
        workload_options(options(**{name: value}))
    except WorkloadError as exc:
        assert "\n" not in str(exc) and str(exc)


_JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                            lambda inner: st.lists(inner, max_size=3)
                            | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
_TRACE_ROWS = st.fixed_dictionaries({}, optional={
    "timestamp": _JSON_VALUES, "input_length": _JSON_VALUES, "output_length": _JSON_VALUES,
    "hash_ids": _JSON_VALUES})


@needs_model
@given(row=_TRACE_ROWS)
@_fast
def test_a_generated_trace_line_is_replayed_or_refused_naming_its_line(row: dict, tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "t.jsonl"
    path.write_text(json.dumps(TRACE[0]) + "\n" + json.dumps(row) + "\n")
    try:
        workload = build(2, workload="trace", trace=str(path))
    except WorkloadError as exc:
        assert str(exc).startswith(f"{path}:2: ") and "\n" not in str(exc)
    else:
        assert count(json.loads(workload.specs[1].body)["prompt"]) == row["input_length"]


_CHAT_LINES = st.one_of(
    _JSON_VALUES.map(json.dumps),
    st.fixed_dictionaries({"messages": st.lists(st.fixed_dictionaries(
        {}, optional={"role": st.sampled_from(["user", "system", "assistant", "bot", 3]),
                      "content": _JSON_VALUES}), max_size=3)}).map(json.dumps),
    st.text(max_size=20))


@given(line=_CHAT_LINES)
@_fast
def test_a_generated_chat_line_is_read_or_refused_naming_its_line(line: str, tmp_path_factory):
    path = tmp_path_factory.mktemp("chat") / "chat.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n' + line.replace("\n", " ") + "\n")
    try:
        build(2, workload="dataset", dataset=str(path), dataset_format="openai")
    except WorkloadError as exc:
        assert str(exc).startswith(f"{path}:2: ") and "\n" not in str(exc)
