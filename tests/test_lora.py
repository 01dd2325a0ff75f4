"""LoRA adapter mixes: the adapters built here (servers/lora.py), requests spread over them by
model name or by llama.cpp's `lora` id (loadtest/workload/lora.py), per-adapter figures in run.json
and the report. Two tests start vLLM CPU and llama.cpp with two adapters (marked engine)."""

from __future__ import annotations

import csv
import json
import struct
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.report.groups import groups_markdown
from loadtest.results.record import RequestRecord
from loadtest.workload import WorkloadError, build_workload, workload_options
from loadtest.workload.build import workload_sha256
from loadtest.workload.lora import AdapterMix, adapter_figures, lora_mix
from servers.lora import build_adapters, lora_flags
from servers.vllm_cpu import TINY_MODEL
from rig_helpers import needs_tiny_model


def _options(**given: str):
    return workload_options(SimpleNamespace(**given))


def _models(workload) -> list[str]:
    return [json.loads(spec.body)["model"] for spec in workload.specs]


def _build(requests: int = 40, api: str = "completions", lora_as: str = "model", **given: str):
    return build_workload("mixed", requests, api=api, model="tiny-llama", max_tokens=8,
                          source=_options(**given), lora_as=lora_as)


def test_uniform_and_zipf_shares():
    assert np.allclose(AdapterMix(("a", "b", "c", "d")).shares(), 0.25)
    zipf = AdapterMix(("a", "b", "c", "d"), zipf_s=1.0).shares()
    assert np.allclose(zipf, np.array([1, 1 / 2, 1 / 3, 1 / 4]) / (25 / 12))


@settings(max_examples=25, deadline=None)
@given(count=st.integers(1, 16), s=st.one_of(st.none(), st.floats(0.1, 3)),
       seed=st.integers(0, 2**32))
def test_the_draw_is_seeded_and_follows_the_shares(count, s, seed):
    mix = AdapterMix(tuple(f"lora{i}" for i in range(count)), s)
    picks = mix.assign(20_000, seed)
    assert picks == mix.assign(20_000, seed)
    seen = Counter(picks)
    assert set(seen) <= set(mix.names)
    for name, share in zip(mix.names, mix.shares()):
        assert abs(seen[name] / 20_000 - share) < 0.02


def test_every_request_names_its_adapter_and_the_hash_covers_the_mix():
    plain, mixed = _build(), _build(lora_adapters="4", lora_mix="zipf:1.2", seed="3")
    assert set(_models(plain)) == {"tiny-llama"}
    assert set(_models(mixed)) <= {"lora0", "lora1", "lora2", "lora3"}
    assert Counter(_models(mixed)).most_common(1)[0][0] == "lora0"
    assert mixed.name == "mixed-40x8-lora4z1.2"
    assert mixed.columns == {"lora_adapters": 4, "lora_mix": "zipf:1.2"}
    assert mixed.sha256 != plain.sha256
    assert mixed.sha256 == workload_sha256("mixed", 40, max_tokens=8, source=_options(
        lora_adapters="4", lora_mix="zipf:1.2", seed="3"))  # a sweep names the cell alike
    named = _build(lora_adapters="tiny-llama,sql", seed="1")
    assert set(_models(named)) == {"tiny-llama", "sql"}
    chat = _build(api="chat", lora_adapters="2")
    assert set(_models(chat)) <= {"lora0", "lora1"}


@pytest.mark.parametrize("given, message", [
    ({"lora_mix": "zipf:1"}, "--lora-mix goes with --lora-adapters"),
    ({"lora_adapters": "0"}, "--lora-adapters must be 1 to 256 adapters"),
    ({"lora_adapters": "a,a"}, "names each adapter once"),
    ({"lora_adapters": "a,,b"}, "--lora-adapters takes N or model names"),
    ({"lora_adapters": "2", "lora_mix": "zipf:0"}, "--lora-mix takes uniform or zipf:S"),
    ({"lora_adapters": "2", "lora_mix": "zipf:nan"}, "--lora-mix takes uniform or zipf:S"),
    ({"lora_adapters": "2", "lora_mix": "pareto"}, "--lora-mix takes uniform or zipf:S"),
])
def test_bad_mixes_are_one_line(given: dict[str, str], message: str):
    with pytest.raises(WorkloadError, match=message):
        _options(**given)


@settings(max_examples=60, deadline=None)
@given(adapters=st.text(max_size=12), mix=st.text(max_size=12))
def test_any_text_is_a_mix_or_one_line(adapters: str, mix: str):
    try:
        chosen = lora_mix(adapters, mix)
    except WorkloadError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("--lora-")
        return
    assert chosen is None or 1 <= len(chosen.names) <= 256


@needs_tiny_model
def test_sources_without_a_model_name_or_with_sessions_are_refused():
    with pytest.raises(WorkloadError, match="carry none"):
        _build(api="generate", lora_adapters="2")
    with pytest.raises(WorkloadError, match="conversations keep one model"):
        build_workload("mixed", 2, api="chat", model="m", max_tokens=4, source=_options(
            workload="conversation", lora_adapters="2", tokenizer=str(TINY_MODEL)))


def test_llamacpp_gets_the_same_mix_as_ids_in_its_lora_field():
    """llama.cpp picks an adapter by its id in the body's `lora` field (the order of its --lora
    flags): the same draw as vLLM's model names, the same hash, so the two race on it."""
    by_name = _build(lora_adapters="4", lora_mix="zipf:1.2", seed="3")
    by_id = _build(lora_adapters="4", lora_mix="zipf:1.2", seed="3", lora_as="lora")
    sent = [json.loads(spec.body) for spec in by_id.specs]
    assert {body["model"] for body in sent} == {"tiny-llama"}
    assert [f"lora{body['lora'][0]['id']}" for body in sent] == _models(by_name)
    assert {body["lora"][0]["scale"] for body in sent} == {1.0}
    assert by_id.sha256 == by_name.sha256 and by_id.name == by_name.name
    records = [RequestRecord(i, "p", 0.0, 0, first_chunk_ns=1_000_000, done_ns=2_000_000,
                             output_tokens=8) for i in range(40)]
    assert adapter_figures(by_id, records, 1.0) == adapter_figures(by_name, records, 1.0)


def test_per_adapter_figures_come_from_the_bodies_sent():
    workload = _build(requests=4, lora_adapters="a,b", seed="0")
    models = _models(workload)
    records = [RequestRecord(i, "p", 0.0, 0, first_chunk_ns=(i + 1) * 1_000_000,
                             done_ns=10_000_000, output_tokens=8,
                             error_kind="http" if i == 3 else None) for i in range(4)]
    figures = adapter_figures(workload, records, 2.0)
    assert sum(f["requests"] for f in figures.values()) == 4
    for name, f in figures.items():
        mine = [i for i, m in enumerate(models) if m == name]
        assert f["requests"] == len(mine) and f["failed"] == (3 in mine)
        assert f["output_tok_per_s"] == 8 * len([i for i in mine if i != 3]) / 2.0
    assert adapter_figures(_build(requests=4), records, 2.0) == {}
    table = groups_markdown(figures)
    assert table.startswith("| adapter | requests | failed | output tok/s |")


@needs_tiny_model
def test_adapters_are_peft_layout_and_deterministic(tmp_path: Path):
    first = build_adapters(TINY_MODEL, tmp_path / "one", 2)
    again = build_adapters(TINY_MODEL, tmp_path / "two", 2)
    assert [f.name for f in first] == ["lora0", "lora1"]
    config = json.loads((first[0] / "adapter_config.json").read_text())
    assert (config["peft_type"], config["r"]) == ("LORA", 8)
    data = (first[0] / "adapter_model.safetensors").read_bytes()
    assert data == (again[0] / "adapter_model.safetensors").read_bytes()
    assert data != (first[1] / "adapter_model.safetensors").read_bytes()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    a = header["base_model.model.model.layers.3.self_attn.o_proj.lora_A.weight"]
    assert a["dtype"] == "F32" and a["shape"] == [8, 256]
    assert max(t["data_offsets"][1] for t in header.values()) == len(data) - 8 - size
    flags = lora_flags(first)
    assert flags[:5] == ["--enable-lora", "--max-loras", "2", "--max-lora-rank", "8"]
    assert flags[6] == f"lora0={first[0].resolve()}"


@pytest.mark.engine
def test_vllm_serves_the_adapters_and_the_run_reports_each(vllm_adapters_reasoning: str,
                                                          tmp_path: Path):
    """The real thing: vLLM CPU started with two adapters built here (conftest.py's
    vllm_adapters_reasoning, which serves tests/test_reasoning_engine.py's reasoning too); a run
    spread over them records figures for each, and the report shows them."""
    from rig_helpers import run_locust

    result = run_locust("--engine", "vllm-cpu", "--host", vllm_adapters_reasoning, "--users", "4",
                        "--requests", "16", "--max-tokens", "4", "--ignore-eos",
                        "--lora-adapters", "2", "--lora-mix", "zipf:1",
                        "--telemetry-interval", "0", "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-2000:]
    [run] = list((tmp_path / "out" / "runs").iterdir())
    saved = json.loads((run / "run.json").read_text())
    assert saved["lora_adapters"] == 2 and saved["lora_mix"] == "zipf:1"
    figures = saved["adapters"]
    assert set(figures) == {"lora0", "lora1"}
    assert sum(f["requests"] for f in figures.values()) == 16
    assert all(f["failed"] == 0 and f["output_tokens"] == 4 * f["requests"]
               for f in figures.values())
    with (tmp_path / "out" / "runs.csv").open(newline="") as file:
        (row,) = list(csv.DictReader(file))
    # the adapters' rates add up to the run's own, counted apart from them in its row
    assert sum(f["output_tok_per_s"] for f in figures.values()) == pytest.approx(
        float(row["output_tok_per_s"]), abs=1e-3)  # the row keeps 3 decimals
    from loadtest.report.cli import main as report_main

    assert report_main([str(tmp_path / "out"), "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## LoRA adapters: figures per adapter" in text and "| lora0 |" in text


@pytest.mark.engine
def test_llamacpp_serves_gguf_adapters_picked_by_id(tmp_path: Path):
    """llama.cpp started with two adapters converted here to GGUF (scripts/build_llamacpp.sh
    --lora-gguf), none applied unless asked; each request names its adapter's id, and the run
    reports each adapter."""
    from loadtest.local_engine import LocalEngine
    from rig_helpers import free_port, run_locust
    from servers.local import LOCAL
    from servers.lora import gguf_adapters, llamacpp_flags

    if LOCAL["llamacpp-cpu"].missing():
        pytest.skip(LOCAL["llamacpp-cpu"].missing() or "")
    files = gguf_adapters(build_adapters(TINY_MODEL, tmp_path / "adapters", 2))
    assert [f.name for f in files] == ["lora0.gguf", "lora1.gguf"]
    with LocalEngine(port=free_port(), engine="llamacpp-cpu", log_path=tmp_path / "engine.log",
                     extra_args=llamacpp_flags(files)) as engine:
        import urllib.request
        with urllib.request.urlopen(engine.url + "/lora-adapters", timeout=10) as response:
            loaded = json.loads(response.read())
        result = run_locust("--engine", "llamacpp-cpu", "--host", engine.url, "--users", "4",
                            "--requests", "16", "--max-tokens", "4", "--ignore-eos",
                            "--lora-adapters", "2", "--telemetry-interval", "0",
                            "--out", str(tmp_path / "out"))
    assert [(a["id"], Path(a["path"]).name) for a in loaded] == [(0, "lora0.gguf"), (1, "lora1.gguf")]
    assert result.returncode == 0, result.stderr[-2000:]
    [run] = list((tmp_path / "out" / "runs").iterdir())
    figures = json.loads((run / "run.json").read_text())["adapters"]
    assert set(figures) == {"lora0", "lora1"}
    assert sum(f["requests"] for f in figures.values()) == 16
    assert all(f["failed"] == 0 and f["output_tokens"] == 4 * f["requests"] for f in figures.values())
