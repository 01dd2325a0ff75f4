"""vLLM and Aphrodite as local GPU engines (servers/vllm.py's gpu_recipe), text-generation-webui on
the llamacpp engine's CUDA build (servers/textgen.py), and the 8B-shaped model.

Fast and CPU-only: the recipes' commands, environments and refusals are read, never run; the
Llama-3-8B shape is checked from its config and weight list, nothing allocated.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import servers.llamacpp
import servers.vllm
from loadtest.sweep.launch import local_args
from loadtest.sweep.matrix import EngineConfig
from servers import aphrodite, vllm
from servers.local import LOCAL
from servers.prefix_cache import vllm_reset
from servers.registry import ENGINES, SPECS, translate
from servers.settings import FLAG_SETTINGS, env_name
from servers.gpus import MULTI_GPU_ENV
from servers.vllm import HOST_PYTHON, gpu_recipe

ROOT = Path(__file__).resolve().parents[1]
RECIPES = {"vllm": (vllm.ENGINE, vllm.VLLM_FLAGS), "aphrodite": (aphrodite.ENGINE, aphrodite.LOCAL_FLAGS)}
# one value per setting the two engines take (MAX_INPUT_TOKENS they refuse)
VALUES = {"MODEL": "/models/llama3-8b", "SERVED_MODEL_NAME": "llama3-8b", "DTYPE": "bfloat16",
          "QUANTIZE": "fp8", "SPECULATE": "2", "MAX_TOTAL_TOKENS": "4096",
          "MAX_BATCH_PREFILL_TOKENS": "8192", "MAX_CONCURRENT_REQUESTS": "256", "SHARDS": "2",
          "GPU_MEMORY_FRACTION": "0.85", "EXTRA_ARGS": "--enforce-eager --seed 1"}
PORT = 18123


def _recipe(slug: str, **settings: str):
    eng, flags = RECIPES[slug]
    return gpu_recipe(eng, flags, env={env_name(slug, name): value for name, value in settings.items()})


def _flags(argv: list[str]) -> list[str]:
    """What follows the fixed part: python -m MODULE serve --host 127.0.0.1 --port PORT."""
    assert argv[1:4] == ["-m", argv[2], "serve"]
    assert argv[4:8] == ["--host", "127.0.0.1", "--port", str(PORT)]
    return argv[8:]


def _compose(slug: str, settings: dict[str, str]) -> list[str]:
    """The Compose service's flags for ``settings`` (translate gives what `docker compose config`
    shows: tests/compose/test_render.py), less its fixed host and port."""
    return translate(slug, settings)[len(RECIPES[slug][0].args):]


@pytest.mark.parametrize("slug", sorted(RECIPES))
@pytest.mark.parametrize("setting", [s for s in FLAG_SETTINGS if s in VALUES])
def test_each_setting_gives_the_compose_services_flag(slug: str, setting: str) -> None:
    settings = {"MODEL": VALUES["MODEL"], setting: VALUES[setting]}
    if setting == "SHARDS":
        settings["GPUS"] = "0,1"
    expected = _compose(slug, settings)
    if slug == "aphrodite" and setting == "SPECULATE":
        # 0.21 has no --speculative-model: vLLM V1's --speculative-config, dotted
        expected = _compose("vllm", settings)
        assert "--speculative-model" in _compose(slug, settings)
    argv = _recipe(slug, **settings).command(PORT, [])
    assert _flags(argv) == expected
    # `serve`, as `vllm serve`: the module entrypoint openai.api_server runs one API server
    # whatever --api-server-count says
    assert argv[2] == f"{slug}.entrypoints.cli.main"


@pytest.mark.parametrize("slug", sorted(RECIPES))
def test_every_setting_at_once_and_extra_args_last(slug: str) -> None:
    settings = {**VALUES, "GPUS": "0,1"}
    argv = _recipe(slug, **settings).command(PORT, ["--max-num-seqs", "64"])
    assert _flags(argv)[-2:] == ["--max-num-seqs", "64"]  # a sweep's flags come last and win
    expected = _compose("vllm" if slug == "aphrodite" else slug, settings)
    assert _flags(argv)[:-2] == expected
    assert ["--speculative-config.num_speculative_tokens", "2"] == expected[expected.index(
        "--speculative-config.num_speculative_tokens"):][:2]


def test_aphrodite_differs_from_its_compose_service_only_in_speculation() -> None:
    differ = {name for name in aphrodite.LOCAL_FLAGS if aphrodite.LOCAL_FLAGS[name] != aphrodite.ENGINE.flags[name]}
    assert differ == {"SPECULATE"} and aphrodite.LOCAL_FLAGS["SPECULATE"] == vllm.VLLM_FLAGS["SPECULATE"]


@pytest.mark.parametrize("slug", sorted(RECIPES))
def test_a_local_sweeps_settings_take_the_local_versions_flags(slug: str) -> None:
    """`launch: local` in a sweep matrix: k = 2 and 8 of n-gram speculation, as the flag matrices
    ask, reach Aphrodite 0.21 in the spelling it takes."""
    for k in ("2", "8"):
        config = EngineConfig(engine=slug, launch="local", settings={"SPECULATE": k, "MAX_CONCURRENT_REQUESTS": "32"},
                              gpus="0")
        compose = _compose("vllm", {"SPECULATE": k, "MAX_CONCURRENT_REQUESTS": "32"})
        assert compose[:2] == ["--model", vllm.ENGINE.defaults["MODEL"]]  # the service's default
        assert local_args(config) == compose[2:]


@pytest.mark.parametrize("slug", sorted(RECIPES))
def test_defaults_serve_the_repositorys_model_under_its_path(slug: str) -> None:
    recipe = _recipe(slug)
    argv = recipe.command(PORT, [])
    model = str(ROOT / "models" / "tiny-llama")
    assert _flags(argv) == ["--model", model]  # no served name: vLLM names it as given
    assert recipe.model_name == model
    assert argv[0] == HOST_PYTHON == (shutil.which("python3") or "/usr/bin/python3")


def test_a_relative_model_folder_is_made_absolute_and_the_served_name_is_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "m8b").mkdir()
    monkeypatch.chdir(tmp_path)
    recipe = _recipe("vllm", MODEL="m8b", SERVED_MODEL_NAME="llama3-8b")
    assert _flags(recipe.command(PORT, []))[:4] == ["--model", str(tmp_path / "m8b"),
                                                     "--served-model-name", "llama3-8b"]
    assert recipe.model_name == "llama3-8b"


@pytest.mark.parametrize("slug", sorted(RECIPES))
def test_environment_flashinfer_sampler_off_dev_mode_on(slug: str) -> None:
    env = _recipe(slug).env
    prefix = slug.upper()
    assert env[f"{prefix}_USE_FLASHINFER_SAMPLER"] == "0"
    assert env[f"{prefix}_SERVER_DEV_MODE"] == "1"  # /reset_prefix_cache
    assert int(env[f"{prefix}_HTTP_TIMEOUT_KEEP_ALIVE"]) >= 600
    assert "CUDA_VISIBLE_DEVICES" not in env and "PYTHONPATH" not in env  # inherited unless set


@pytest.mark.parametrize("slug", sorted(LOCAL))
def test_every_local_engine_keeps_nvlink_multicast_off(slug: str) -> None:
    """Whatever its recipe sets: NCCL, torch's symmetric memory and NVSHMEM leave NVLS off."""
    from loadtest.local_engine import LocalEngine

    assert MULTI_GPU_ENV == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                             "NVSHMEM_DISABLE_NVLS": "1"}
    assert MULTI_GPU_ENV.items() <= LocalEngine(engine=slug).environment().items()


def test_every_gpu_compose_service_keeps_nvlink_multicast_off() -> None:
    from servers.compose import service

    for eng in (e for e in ENGINES.values() if e.gpu):
        assert {f"{k}={v}" for k, v in MULTI_GPU_ENV.items()} <= set(service(eng)["environment"]), eng.slug


def test_gpus_and_python_come_from_the_environment() -> None:
    recipe = gpu_recipe(vllm.ENGINE, vllm.VLLM_FLAGS, env={
        "VLLM_GPUS": "2,3", "RIG_VLLM_PYTHON": "/opt/rig/vllm/python"})  # the bundle's interpreter
    assert recipe.env["CUDA_VISIBLE_DEVICES"] == "2,3" and recipe.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert recipe.command(PORT, [])[0] == "/opt/rig/vllm/python"


def test_the_rigs_settings_leave_the_engines_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM reads VLLM_PORT as its own internal port base: the .env's VLLM_PORT=8000, exported,
    must not reach it."""
    monkeypatch.setenv("VLLM_PORT", "8000")
    monkeypatch.setenv("VLLM_SPECULATE", "2")
    argv = _recipe("vllm", SPECULATE="2").command(PORT, [])
    assert argv[:5] == ["env", "-u", "VLLM_SPECULATE", "-u", "VLLM_PORT"]
    assert argv[6:9] == ["-m", "vllm.entrypoints.cli.main", "serve"]


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """This host as the recipes see it: a GPU or not, the engine importable or not."""
    seen = {"gpu": True, "installed": True}
    monkeypatch.setattr(servers.vllm, "_nvidia_gpu", lambda: seen["gpu"])
    monkeypatch.setattr(servers.vllm, "_importable", lambda python, package: seen["installed"])
    return seen


def _one_line(why: str | None) -> str:
    assert why and "\n" not in why
    return why


@pytest.mark.parametrize("slug", sorted(RECIPES))
def test_refusals_are_one_line_each(slug: str, host: dict[str, bool], tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    assert _recipe(slug, MODEL=str(model)).missing() is None
    assert "no model at" in _one_line(_recipe(slug, MODEL=str(tmp_path / "nothing")).missing())
    assert _recipe(slug, MODEL="org/model-in-the-hub-cache").missing() is None
    refused = _one_line(_recipe(slug, MODEL=str(model), MAX_INPUT_TOKENS="100").missing())
    assert refused.startswith(f"{slug} does not support MAX_INPUT_TOKENS")
    assert "SHARDS=2 needs 2 GPUs" in _one_line(_recipe(slug, MODEL=str(model), SHARDS="2").missing())
    host["installed"] = False
    why = _one_line(_recipe(slug, MODEL=str(model)).missing())
    assert why.startswith(f"{slug} is not installed for {HOST_PYTHON}")
    assert f"scripts/gpu_bundle.sh install ... --target DIR (docs/gpus.md) and set RIG_{slug.upper()}_PYTHON" in why
    host["gpu"] = False
    assert _one_line(_recipe(slug, MODEL=str(model)).missing()).startswith("no NVIDIA GPU here")


@pytest.mark.parametrize("slug", sorted(RECIPES))
def test_a_rope_base_that_transformers_4_cannot_read_is_refused(slug: str, host: dict[str, bool],
                                                                tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder as transformers 5 writes it (RoPE's base only under rope_parameters) is refused
    for an engine whose transformers is 4 (Aphrodite 0.21: 4.57, which ran SmolLM2 at base
    10,000); with both spellings, or on transformers 5, it starts."""
    model = tmp_path / "m"
    model.mkdir()
    v5 = {"model_type": "llama", "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}}
    (model / "config.json").write_text(json.dumps(v5))
    versions = iter(["4.57.6", "5.17.0", "4.57.6"])
    monkeypatch.setattr(servers.vllm, "_transformers_version", lambda python: next(versions))
    why = _one_line(_recipe(slug, MODEL=str(model)).missing())
    assert "only under rope_parameters" in why and "transformers 4.57.6" in why
    assert '"rope_theta": 100000.0' in why
    assert _recipe(slug, MODEL=str(model)).missing() is None  # transformers 5 reads it
    (model / "config.json").write_text(json.dumps({**v5, "rope_theta": 100000.0}))
    assert _recipe(slug, MODEL=str(model)).missing() is None  # both spellings: no version asked
    base = {**v5, "rope_parameters": {"rope_theta": servers.vllm.TRANSFORMERS_4_ROPE_BASE}}
    (model / "config.json").write_text(json.dumps(base))
    assert _recipe(slug, MODEL=str(model)).missing() is None  # 4's default: read alike


def test_the_transformers_version_is_read_without_importing_it() -> None:
    assert servers.vllm._transformers_version("/nonexistent/python3") is None
    expected = (importlib.metadata.version("transformers")
                if importlib.util.find_spec("transformers") else None)
    assert servers.vllm._transformers_version(sys.executable) == expected


def test_an_interpreter_without_vllm_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real check, on this test's own Python (the rig's venv has no vLLM)."""
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("this Python has vLLM")
    assert not servers.vllm._importable(sys.executable, "vllm")
    assert servers.vllm._importable(sys.executable, "json")
    assert not servers.vllm._importable("/nonexistent/python3", "json")


def test_rig_engine_start_refuses_here_in_one_error_line(tmp_path: Path) -> None:
    if servers.vllm._nvidia_gpu():
        pytest.skip("this host has an NVIDIA GPU")
    started = subprocess.run([sys.executable, "-m", "loadtest.local_engine", "start", "--engine", "vllm",
                              "--pidfile", str(tmp_path / "engine.pid")],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert started.returncode == 2
    assert started.stderr.splitlines() == [
        "error: no NVIDIA GPU here (NVML and nvidia-smi found none): vllm runs on a GPU host; on CPU use vllm-cpu"]
    assert not (tmp_path / "engine.pid").exists()


@pytest.mark.parametrize("slug", sorted(RECIPES))
def test_the_specs_carry_the_recipes_metrics_and_reset(slug: str) -> None:
    spec = SPECS[slug]
    assert spec.local is LOCAL[slug] and spec.local.slug == slug
    assert spec.prefix_cache.reset is vllm_reset
    assert spec.metrics and spec.metrics["running"] == [f"{slug}:num_requests_running"]


# ---- the Llama-3-8B-shaped model (servers/vllm-cpu/tiny_model.py) ----

def _tiny_model():
    spec = importlib.util.spec_from_file_location("tiny_model", ROOT / "servers" / "vllm-cpu" / "tiny_model.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_8b_shape_is_llama3_8bs_config() -> None:
    fields = _tiny_model().config_fields("llama3-8b")
    assert {k: fields[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                   "intermediate_size", "vocab_size", "rope_theta", "max_position_embeddings",
                                   "torch_dtype", "tie_word_embeddings")} == {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "intermediate_size": 14336, "vocab_size": 128256, "rope_theta": 500000.0,
        "max_position_embeddings": 8192, "torch_dtype": "bfloat16", "tie_word_embeddings": False}
    assert fields["architectures"] == ["LlamaForCausalLM"]


@pytest.mark.parametrize("shape, base", [("tinyllama-1.1b", 10000.0), ("llama3-8b", 500000.0)])
def test_the_gpu_shapes_folder_gives_its_rope_base_to_transformers_4_too(shape: str, base: float,
                                                                        tmp_path: Path, monkeypatch) -> None:
    """Transformers 5 writes the RoPE base only under rope_parameters (as the stand-in build below
    does); Aphrodite 0.21 (transformers 4.57) would read 10,000 for the 8B shape's 500,000, and
    `rig engine start` refuses such a folder. tiny_model.py writes both spellings for the GPU
    shapes (the fifth H200 lease: Aphrodite served the 8B), and leaves the tiny model's bytes."""
    tiny_model = _tiny_model()

    def build(out: Path, shape: str) -> None:  # what transformers 5's save_pretrained writes
        (out / "config.json").write_text(json.dumps(
            {"rope_parameters": {"rope_theta": tiny_model.SHAPES[shape].get("rope_theta", 10000.0),
                                 "rope_type": "default"}}))

    monkeypatch.setattr(tiny_model, "build_tokenizer", lambda out, shape: (out / "tokenizer_config.json")
                        .write_text(json.dumps({"tokenizer_class": "TokenizersBackend"})))
    monkeypatch.setattr(tiny_model, "build_model", build)
    for name, expected in ((shape, base), ("tiny", None)):
        assert tiny_model.main(["--shape", name, str(tmp_path / name)]) == 0
        config = json.loads((tmp_path / name / "config.json").read_text())
        assert config.get("rope_theta") == expected
        if expected:
            assert vllm._rope_base_unread(tmp_path / name / "config.json", "aphrodite", sys.executable) is None


def test_the_8b_shape_has_llama3_8bs_weights_16_gb_in_bf16_and_shards_it() -> None:
    tiny_model = _tiny_model()
    shapes = tiny_model.parameter_shapes("llama3-8b")
    params = sum(math.prod(dims) for dims in shapes.values())
    assert params == 8_030_261_248  # Meta-Llama-3-8B's count
    assert 2 * params / 1e9 == pytest.approx(16.06, abs=0.01)
    assert len(shapes) == 2 + 32 * 9 + 1
    assert shapes["model.layers.0.self_attn.k_proj.weight"] == (1024, 4096)  # 8 KV heads of 128
    assert "llama3-8b" in tiny_model.SHARDED and "tiny" not in tiny_model.SHARDED


def test_the_small_shapes_are_unchanged() -> None:
    """The tiny model's digest is in results and evidence: its config must not move."""
    tiny_model = _tiny_model()
    assert tiny_model.config_fields("tiny") == {
        "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 4096, "bos_token_id": 0,
        "eos_token_id": 1, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 4096,
        "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 4}
    params = sum(math.prod(d) for d in tiny_model.parameter_shapes("tinyllama-1.1b").values())
    assert params == 1_100_048_384  # TinyLlama-1.1B's count


@pytest.mark.parametrize("argv, said", [
    (["--shape", "llama3-70b", "out"], "error: --shape takes one of tiny, tinyllama-1.1b, llama3-8b (got 'llama3-70b')"),
    (["--shape"], "error: --shape takes one of tiny, tinyllama-1.1b, llama3-8b (got nothing)"),
    (["--shape", "llama3-8b"], "usage: python servers/vllm-cpu/tiny_model.py [--shape tiny|tinyllama-1.1b|llama3-8b] "
                               "OUT_DIR"),
    (["--size", "8b", "out"], "usage: python servers/vllm-cpu/tiny_model.py [--shape tiny|tinyllama-1.1b|llama3-8b] "
                              "OUT_DIR"),
])
def test_tiny_model_refuses_a_shape_it_does_not_have(argv: list[str], said: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert _tiny_model().main(argv) == 2
    assert capsys.readouterr().err.strip() == said


# ---- text-generation-webui on the llamacpp engine's CUDA llama-server (servers/textgen.py) ----

def test_textgen_serves_the_llamacpp_engines_binary_and_gguf_on_the_gpu() -> None:
    from servers import llamacpp, textgen
    from servers.llamacpp_cpu import DEFAULT_SLOTS, SLOT_TOKENS

    argv = textgen.command(PORT, [])
    assert argv[:7] == [str(textgen.PYTHON), str(textgen.BOOT), str(textgen.SOURCE), "--nowebui", "--api",
                        "--api-port", str(PORT)]
    given = dict(zip(argv[7::2], argv[8::2]))
    assert given == {"--loader": "llama.cpp", "--model-dir": str(llamacpp.GGUF.parent),
                     "--model": llamacpp.GGUF.name, "--gpu-layers": "999", "--parallel": str(DEFAULT_SLOTS),
                     "--extra-flags": "metrics", "--ctx-size": str(DEFAULT_SLOTS * SLOT_TOKENS)}
    assert textgen.RECIPE.env["RIG_LLAMA_SERVER"] == str(llamacpp.binary())
    assert textgen.RECIPE.model_name == llamacpp.RECIPE.model_name
    assert SPECS["textgen"].local is textgen.RECIPE is LOCAL["textgen"]


def test_textgen_on_the_gpu_takes_the_users_slots_and_layers() -> None:
    from servers import textgen
    from servers.llamacpp_cpu import SLOT_TOKENS

    argv = textgen.command(PORT, ["--parallel", "32", "--n-gpu-layers", "20"])
    assert argv[-4:] == ["--parallel", "32", "--n-gpu-layers", "20"]
    assert "--gpu-layers" not in argv and argv.count("--parallel") == 1
    assert argv[argv.index("--ctx-size") + 1] == str(32 * SLOT_TOKENS)


def test_textgen_on_the_gpu_says_what_is_missing_first() -> None:
    from servers import textgen

    if (textgen.SOURCE / "server.py").exists() and textgen.PYTHON.exists():
        assert textgen.missing() == servers.llamacpp.RECIPE.missing()
    else:
        assert _one_line(textgen.missing()).endswith("run scripts/install_textgen.sh")
