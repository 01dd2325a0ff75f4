"""The one list of engines: every ``SPEC`` in ``servers/``, and the two functions a sweep needs.

    translate("tgi", {"SPECULATE": "2"})[-2:]    -> ['--speculate', '2']
    validate("textgen", {"DTYPE": "float16"})   -> SettingError: textgen does not support DTYPE
                                                   (TEXTGEN_DTYPE): text-generation-webui has no ...

``settings`` use the bare setting names of ``servers.settings.SETTINGS``
(``"MAX_TOTAL_TOKENS"``), not the prefixed ``.env`` names; an empty value
means "not set". ``translate`` gives the same argv as ``docker compose config``
shows for the engine's service with the same ``.env`` (tests check this).

``SPECS`` holds every engine's ``EngineSpec`` (servers/spec.py), found by ``discover``: a module
of ``servers/`` that assigns ``SPEC`` is an engine, so adding one is that module alone.
``ENGINES`` is the view Compose needs: the specs that have a container.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import shlex
from pathlib import Path

from servers.engine import Engine
from servers.settings import SETTINGS, SettingError, check_value, env_name, parse_gpus
from servers.spec import EngineSpec

__all__ = ["ENGINES", "IMAGES_CHECKED", "SPECS", "discover", "engine", "from_env", "refusal", "spec",
           "translate", "validate"]

_ASSIGNS_SPEC = re.compile(r"^SPEC\s*[:=]", re.MULTILINE)


def discover(package: str = "servers") -> dict[str, EngineSpec]:
    """Every ``SPEC`` in ``package``'s modules, by slug, in module-name order.

    A module is read as text first and imported only when it assigns ``SPEC`` at top level:
    importing every module would import the ones that use this registry (compose, balancer,
    check) while it is still being built."""
    found: dict[str, EngineSpec] = {}
    folder = Path(importlib.import_module(package).__file__ or "").parent
    for module in sorted(pkgutil.iter_modules([str(folder)]), key=lambda m: m.name):
        source = folder / f"{module.name}.py"
        if module.ispkg or not source.exists() or not _ASSIGNS_SPEC.search(source.read_text()):
            continue
        one = importlib.import_module(f"{package}.{module.name}").SPEC
        if one.slug in found:
            raise ValueError(f"engine {one.slug!r} is defined twice in {package}")
        found[one.slug] = one
    return found

# The day each engine's pinned image tag (``Engine.image``) was last checked
# against public sources; no registry is reachable from the rig's CI.
IMAGES_CHECKED = "2026-11-22"

SPECS: dict[str, EngineSpec] = discover()
ENGINES: dict[str, Engine] = {slug: s.container for slug, s in SPECS.items() if s.container is not None}


def spec(slug: str) -> EngineSpec:
    """The spec of ``slug`` (hosted APIs included), or SettingError naming the known ones."""
    if slug not in SPECS:
        raise SettingError(f"unknown engine {slug!r}; known: {', '.join(SPECS)}")
    return SPECS[slug]


def engine(slug: str) -> Engine:
    """The engine named ``slug``, or SettingError naming the known ones."""
    if slug not in ENGINES:
        raise SettingError(f"unknown engine {slug!r}; known: {', '.join(ENGINES)}")
    return ENGINES[slug]


def from_env(slug: str, env: dict[str, str]) -> dict[str, str]:
    """Pick ``slug``'s settings out of ``.env``-style names (``TGI_SPECULATE`` -> ``SPECULATE``)."""
    engine(slug)
    return {name: env[env_name(slug, name)] for name in SETTINGS if env.get(env_name(slug, name))}


def refusal(eng: Engine, name: str) -> str | None:
    """Why ``eng`` cannot take setting ``name``, or None if it can."""
    if name in eng.refused:
        return eng.refused[name]
    if name == "GPUS" and not eng.gpu:
        return "it runs on CPU"
    if name == "HOST" and "HOST" not in eng.arg_defaults:
        return "it listens on all addresses at its image's port"
    return None


def validate(slug: str, settings: dict[str, str], gpu_count: int | None = None) -> None:
    """Raise SettingError (one line, naming the engine) if ``settings`` can't start ``slug``.

    ``gpu_count``, when known, bounds the GPU indexes in ``GPUS``.
    """
    eng = engine(slug)
    for name, value in settings.items():
        if not value:
            continue
        reason = refusal(eng, name) if name in SETTINGS else None
        if reason:
            raise SettingError(f"{slug} does not support {name} ({env_name(slug, name)}): {reason}")
        try:
            check_value(name, value)
            if name in eng.choices and value not in eng.choices[name]:
                raise SettingError(f"{name} must be one of {', '.join(eng.choices[name])} (got {value!r})")
            if name == "GPUS":
                parse_gpus(value, gpu_count)
        except SettingError as err:
            raise SettingError(f"{slug}: {err}") from None
    _check_shards(slug, eng, settings)


def _check_shards(slug: str, eng: Engine, settings: dict[str, str]) -> None:
    shards, gpus = settings.get("SHARDS"), (settings.get("GPUS") or "0").split(",")
    if shards and eng.gpu and int(shards) > len(gpus):
        raise SettingError(f"{slug}: SHARDS={shards} needs {shards} GPUs but GPUS lists {len(gpus)}")


def translate(slug: str, settings: dict[str, str]) -> list[str]:
    """The engine's argv (after its image's entrypoint) for ``settings``; validates first."""
    validate(slug, settings)
    eng = engine(slug)
    listen = {k: settings.get(k) or v for k, v in eng.arg_defaults.items()}
    argv = [arg.format(**listen) if listen else arg for arg in eng.args]
    for name, template in eng.flags.items():
        value = settings.get(name) or eng.defaults.get(name, "")
        if value:
            argv += [part.replace("{}", value) for part in template]
    if settings.get("EXTRA_ARGS"):
        argv += shlex.split(settings["EXTRA_ARGS"])
    return argv
