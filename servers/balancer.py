"""One engine replica per GPU behind nginx: the "data parallel instead of sharding" layout.

    python -m servers.balancer ENGINE GPUS          e.g. python -m servers.balancer tgi 0,1,2,3
    python -m servers.balancer vllm-cpu --replicas N

writes ``build/lb-ENGINE.yml`` (services ``ENGINE-gpu0`` ... each pinned to one GPU,
plus ``ENGINE-lb``, nginx in profile ``lb``) and ``build/lb-ENGINE.nginx.conf``, and
prints the command that starts it. Compose cannot make one service per item of
a variable, so this file is generated; each replica runs the same engine
command as the ``ENGINE`` service in docker-compose.yml, from the same ``.env``.
nginx publishes the engine's usual host port, so the rig drives it like the
engine itself. It balances by least connections with proxy buffering off, so
token streams pass through as they are produced; the upstream's state lives in a shared zone,
so every nginx worker counts the same connections.

Without Docker, the sweep's local launcher (loadtest/sweep/launch.py) runs the replicas as
local processes and nginx itself (``nginx_binary()``: RIG_NGINX, else ``nginx`` on PATH or
/usr/sbin/nginx) with ``local_nginx_conf()``: the same upstream and server block, on
127.0.0.1:PORT, its pid, temp files and log in one folder.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from loadtest.toolkit.repo import REPO
from servers.compose import HEADER, service
from servers.engine import Engine
from servers.registry import engine
from servers.settings import SettingError, env_name, parse_gpus

__all__ = ["NGINX_IMAGE", "local_nginx_conf", "main", "nginx_binary", "nginx_conf", "nginx_missing",
           "render"]

NGINX_IMAGE = "nginx:1.27.5-alpine"
_SBIN_NGINX = "/usr/sbin/nginx"  # Debian's, often not on a user's PATH


def nginx_conf(backends: list[str], listen: str = "80") -> str:
    """nginx config: least connections, no proxy buffering, long reads for long generations.

    No upstream keep-alive: llama.cpp closes the connection after every streamed answer, and
    uvicorn (vLLM, transformers) an idle one after 5 s, so a reused upstream connection may be
    closed under nginx, which then answers 502 (a POST is never sent again to another server).
    One fresh connection per request costs little beside a generation.

    /metrics answers 404: through the balancer each scrape would reach whichever replica is
    free, and counters of different servers subtracted from one another are not the engine's;
    a run's telemetry then says the engine's metrics are absent (scrape each replica instead)."""
    servers = "".join(f"    server {b} max_fails=3 fail_timeout=30s;\n" for b in backends)
    return (
        "upstream engine {\n    least_conn;\n    zone engine 256k;\n" + servers + "}\n\n"
        "server {\n"
        f"    listen {listen};\n"
        "    location = /metrics {\n"
        "        return 404;\n"
        "    }\n"
        "    location / {\n"
        "        proxy_pass http://engine;\n"
        "        proxy_http_version 1.1;\n"
        '        proxy_set_header Connection "";\n'
        "        proxy_set_header Host $host;\n"
        "        proxy_buffering off;\n"
        "        proxy_cache off;\n"
        "        proxy_request_buffering off;\n"
        "        proxy_read_timeout 3600s;\n"
        "        proxy_send_timeout 3600s;\n"
        "        client_max_body_size 64m;\n"
        "    }\n"
        "}\n"
    )


def local_nginx_conf(backends: list[str], port: int, folder: Path) -> str:
    """A whole nginx.conf for nginx as a local process: ``nginx_conf`` on 127.0.0.1:``port``,
    with its pid and temp files in ``folder`` (run it with ``-p FOLDER -c CONF -e stderr``)."""
    temp = "".join(f"    {kind}_temp_path {folder / 'temp' / kind};\n"
                   for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    inner = "".join(f"    {line}\n" if line else "\n"
                    for line in nginx_conf(backends, f"127.0.0.1:{port}").splitlines())
    return (f"pid {folder / 'nginx.pid'};\n"
            "error_log stderr warn;\n"
            "daemon off;\n"
            "worker_processes auto;\n"
            "events {\n    worker_connections 4096;\n}\n\n"
            "http {\n    access_log off;\n" + temp + "\n" + inner + "}\n")


def nginx_binary() -> str | None:
    """The nginx a local balancer runs: RIG_NGINX, else nginx on PATH, else /usr/sbin/nginx."""
    if os.environ.get("RIG_NGINX"):
        return os.environ["RIG_NGINX"]
    found = shutil.which("nginx")
    if found:
        return found
    return _SBIN_NGINX if os.access(_SBIN_NGINX, os.X_OK) else None


def nginx_missing() -> str | None:
    """Why no nginx can run for a local balancer (one line naming how to get one), or None."""
    chosen = os.environ.get("RIG_NGINX")
    if chosen:
        if os.path.isfile(chosen) and os.access(chosen, os.X_OK):
            return None
        return f"RIG_NGINX={chosen} is not an executable file; point it at an nginx binary or unset it"
    if nginx_binary() is None:
        return ("no nginx for the local balancer: install it (Debian/Ubuntu: "
                "apt-get install nginx-light; scripts/test.sh does) or set RIG_NGINX to its binary")
    return None


def gpu_groups(gpus: str, shards: int = 1) -> list[str]:
    """The GPU set as replicas of ``shards`` GPUs each, in order: one per GPU by default;
    "0,1,2,3" with 2 -> ["0,1", "2,3"] (two tensor-parallel servers behind one balancer)."""
    ids = gpus.split(",")
    return [",".join(ids[i:i + shards]) for i in range(0, len(ids), shards)]


def replica_name(gpus: str) -> str:
    """gpu0, or gpu0_1 for a replica of two GPUs."""
    return "gpu" + gpus.replace(",", "_")


def _replica(eng: Engine, gpu: str | None) -> dict[str, Any]:
    svc = service(eng)
    del svc["ports"]
    for key, default in eng.arg_defaults.items():  # replicas listen on the default inside the network
        expr = f"${{{env_name(eng.slug, key)}:-{default}}}"
        svc["command"] = svc["command"].replace(expr, default)
        svc["healthcheck"]["test"] = [t.replace(expr, default) for t in svc["healthcheck"]["test"]]
    svc["profiles"] = ["lb"]
    if gpu is not None:
        svc["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] = gpu.split(",")
    return svc


def render(slug: str, gpus: list[str | None], conf_path: str) -> tuple[str, str]:
    """(compose file text, nginx.conf text) for one replica per entry of ``gpus`` (a GPU, a
    group of them "0,1", or None on CPU)."""
    eng = engine(slug)
    names = [f"{slug}-{replica_name(g)}" if g is not None else f"{slug}-{i}" for i, g in enumerate(gpus)]
    port = eng.container_port or eng.arg_defaults["PORT"]
    services = {name: _replica(eng, g) for name, g in zip(names, gpus)}
    host_port = f"${{{env_name(slug, 'PORT')}:-{eng.host_port}}}"
    services[f"{slug}-lb"] = {
        "image": f"${{LB_IMAGE:-{NGINX_IMAGE}}}",
        "profiles": ["lb"],
        "ports": [f"${{BIND_ADDRESS:-127.0.0.1}}:{host_port}:80"],
        "volumes": [f"{conf_path}:/etc/nginx/conf.d/default.conf:ro"],
        "depends_on": {name: {"condition": "service_healthy"} for name in names},
        "healthcheck": {
            "test": ["CMD", "wget", "-q", "-O", "/dev/null", f"http://127.0.0.1:80{eng.health_path}"],
            "interval": "10s",
            "timeout": "5s",
            "retries": 3,
        },
    }
    doc = {
        "name": f"llm-load-rig-lb-{slug}",
        "services": services,
        "volumes": {"model-cache": {"name": "llm-load-rig-model-cache"}},
    }
    text = HEADER.replace("servers.compose", "servers.balancer") + yaml.safe_dump(
        doc, sort_keys=False, width=10_000, default_flow_style=False
    )
    backends = [f"{name}:{port}" for name in names]
    return text, nginx_conf(backends)


def _parse_args(argv: list[str]) -> tuple[str, list[str | None]]:
    if len(argv) != 2 and not (len(argv) == 3 and argv[1] == "--replicas"):
        raise SettingError("usage: python -m servers.balancer ENGINE GPUS | ENGINE --replicas N")
    slug = argv[0]
    eng = engine(slug)
    if len(argv) == 3:
        if eng.gpu:
            raise SettingError(f"{slug} runs on GPUs: give GPU indexes, e.g. python -m servers.balancer {slug} 0,1")
        if not argv[2].isdigit() or int(argv[2]) < 1:
            raise SettingError(f"--replicas must be a whole number >= 1 (got {argv[2]!r})")
        return slug, [None] * int(argv[2])
    if not eng.gpu:
        raise SettingError(f"{slug} runs on CPU: use --replicas N instead of GPUs")
    return slug, list(parse_gpus(argv[1]))


def main(argv: list[str]) -> int:
    try:
        slug, gpus = _parse_args(argv)
    except SettingError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    compose_path = REPO / "build" / f"lb-{slug}.yml"
    conf_path = REPO / "build" / f"lb-{slug}.nginx.conf"
    compose_text, conf_text = render(slug, gpus, f"./build/{conf_path.name}")
    compose_path.parent.mkdir(parents=True, exist_ok=True)
    compose_path.write_text(compose_text)
    conf_path.write_text(conf_text)
    print(f"wrote {compose_path.relative_to(REPO)} and {conf_path.relative_to(REPO)}; start with:")
    print(f"  docker compose --project-directory . -f build/{compose_path.name} --profile lb up -d --wait")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
