"""`rig k8s`: the Kubernetes objects of a distributed run, from `rig run`'s own options.

    rig k8s --engine vllm --host http://vllm.llm.svc:8000 --users 512 --requests 4096 \\
        --workers 4 --worker-cpus 2 > run.yaml
    kubectl apply -f run.yaml

The options are `rig run`'s, checked as `rig run` checks them (loadtest/cli/run.py), the
workload built as the run will build it (so a file the run would refuse is refused here, not in
the cluster's pods), plus where
the run goes (loadtest/deploy/kubernetes.py). Input files the options name (a prompts, dataset,
trace or stages file, a length histogram) travel in the run's ConfigMap and are read there.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from loadtest.cli import run
from loadtest.toolkit.args import command_prog
from loadtest.toolkit.types import BadValue, non_negative_int, positive_int
from loadtest.client.options import ConfigError
from loadtest.client.targets import TARGETS
from loadtest.deploy.kubernetes import INPUTS_DIR, LOCUSTFILE, Deployment, render
from loadtest.launch import RunSpec, command
from loadtest.launch.checks import check_run_options, check_workload
from loadtest.workload import WorkloadError
from servers.images import RIG_IMAGE

__all__ = ["main", "parser"]

DEFAULT_IMAGE = RIG_IMAGE
CONFIGMAP_LIMIT = 1024 * 1024  # Kubernetes refuses a larger ConfigMap
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?")  # a DNS label, room for "-workers"
_QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?")
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}
_NOT_HERE = ("--processes", "--client-cpus", "--out")  # the objects decide these


def k8s_name(text: object) -> str:
    value = str(text)
    if not _NAME.fullmatch(value):
        raise BadValue(f"must be a lower-case DNS label of at most 40 characters (a-z, 0-9, -), "
                       f"got {value!r}")
    return value


def memory(text: object) -> str:
    value = str(text)
    if not _QUANTITY.fullmatch(value):
        raise BadValue(f"must be a Kubernetes memory quantity like 2Gi or 512Mi, got {value!r}")
    return value


def image(text: object) -> str:
    value = str(text)
    if not value or any(c.isspace() for c in value):
        raise BadValue(f"must be an image reference like {DEFAULT_IMAGE}, got {value!r}")
    return value


def parser() -> argparse.ArgumentParser:
    p = run.parser()
    p.prog = command_prog("rig k8s")
    p.description = ("The Kubernetes objects of a distributed run, from rig run's options: the "
                     "Locust master (a Job and its Service), the workers (an indexed Job), the "
                     "options' input files (a ConfigMap). Written to standard output, or --manifest.")
    p.epilog = ("example:\n  rig k8s --engine vllm --host http://vllm.llm.svc:8000 --users 512 "
                "--requests 4096 --workers 4 --worker-cpus 2 > run.yaml\n"
                "  kubectl apply -f run.yaml && kubectl logs -f job/rig-run-master\n"
                "exit: 0 written, 2 bad input (nothing written)")
    for action in p._actions:
        if "--host" in action.option_strings:
            action.help = ("the engine's base URL as the pods reach it (default: a Service named "
                           "as the engine on its port, http://ENGINE:PORT, in the run's namespace)")
    where = p.add_argument_group("Kubernetes")
    where.add_argument("--name", type=k8s_name, default="rig-run",
                       help="the objects' name prefix (default rig-run)")
    where.add_argument("--namespace", type=k8s_name, default=None,
                       help="their namespace (default: kubectl's current one)")
    where.add_argument("--workers", type=positive_int, default=2, help="worker pods (default 2)")
    where.add_argument("--worker-cpus", type=positive_int, default=1,
                       help="whole cores per worker pod, each one Locust process (default 1)")
    where.add_argument("--worker-memory", type=memory, default="1Gi")
    where.add_argument("--master-cpus", type=positive_int, default=1)
    where.add_argument("--master-memory", type=memory, default="2Gi")
    where.add_argument("--image", type=image, default=DEFAULT_IMAGE,
                       help=f"the rig's image (default {DEFAULT_IMAGE}: scripts/build_images.sh rig)")
    where.add_argument("--hold-s", type=non_negative_int, default=600,
                       help="seconds the master's pod stays after the run, for kubectl cp "
                            "(default 600)")
    where.add_argument("--api-key-secret", type=k8s_name, default=None,
                       help="a Secret whose key api-key the pods read as the engine's key variable "
                            "(LLM_API_KEY, OPENAI_API_KEY, HF_TOKEN); the key is never written "
                            "into the objects")
    where.add_argument("--manifest", type=Path, default=None,
                       help="write the objects here instead of standard output")
    return p


def checked_args(argv: list[str]) -> argparse.Namespace:
    p = parser()
    if "--" in argv:
        p.error("rig k8s takes no Locust options after --")
    args = p.parse_args(argv)
    given = [flag for flag in _NOT_HERE if any(a == flag or a.startswith(flag + "=") for a in argv)]
    if given:
        p.error(f"{given[0]} is decided by the objects: --workers x --worker-cpus processes, "
                "results in the master's pod")
    target = TARGETS.get(args.engine)
    if not args.host and target is not None and not target.hosted:
        args.host = f"http://{args.engine}:{target.port}"  # a Service named as the engine
    if args.host and _is_loopback(args.host):
        p.error("--host must be the engine's address as the pods reach it (a Service's DNS name "
                f"or an IP), got {args.host!r}")
    args.num_users = args.users
    args.processes = args.workers * args.worker_cpus  # the checks the master will make
    args.api_key_env = target.api_key_env if target is not None else ""
    try:
        with _key_in_secret(args.api_key_env, args.api_key_secret):
            check_workload(args, check_run_options(args, args.host))  # as the pods would
    except (ConfigError, WorkloadError) as exc:
        p.error(str(exc))
    return args


@contextlib.contextmanager
def _key_in_secret(name: str, secret: str | None):  # type: ignore[no-untyped-def]
    """The engine's key is the pods' (from the Secret), not this shell's: the checks that ask for
    it are told it is there. Nothing of it is read or written."""
    if not secret or not name or os.environ.get(name):
        yield
        return
    os.environ[name] = f"<from Secret {secret}>"
    try:
        yield
    finally:
        del os.environ[name]


def main(argv: list[str] | None = None) -> int:
    args = checked_args(sys.argv[1:] if argv is None else list(argv))
    # the run as `rig run` would launch it, with the image's Locust and locustfile
    spec = RunSpec.from_options(args, host=args.host or "", users=args.users,
                                spawn_rate=args.spawn_rate, locust=("locust",),
                                locustfile=Path(LOCUSTFILE))
    try:
        locust_args, inputs = _carried(command(spec)[3:])  # after `locust -f LOCUSTFILE`
    except ValueError as exc:
        parser().error(str(exc))
    deployment = Deployment(name=args.name, image=args.image, workers=args.workers,
                            worker_cpus=args.worker_cpus, worker_memory=args.worker_memory,
                            master_cpus=args.master_cpus, master_memory=args.master_memory,
                            hold_s=args.hold_s, namespace=args.namespace,
                            api_key_secret=args.api_key_secret,
                            api_key_env=args.api_key_env or "LLM_API_KEY")
    text = yaml.safe_dump_all(render(deployment, locust_args, inputs), sort_keys=False)
    if args.manifest is None:
        sys.stdout.write(text)
        return 0
    try:
        args.manifest.write_text(text)
    except OSError as exc:
        parser().error(f"cannot write --manifest {args.manifest}: {exc.strerror}")
    return 0


def _carried(arguments: list[str]) -> tuple[list[str], dict[str, bytes]]:
    """The arguments with every file an option names moved to INPUTS_DIR (`--opt FILE`,
    `--opt=FILE`, `hist:FILE`), and those files' contents; ValueError for a folder (a
    tokenizer's: build it into the image) or too much for a ConfigMap."""
    out: list[str] = []
    inputs: dict[str, bytes] = {}
    for index, argument in enumerate(arguments):
        flag, eq, value = argument.partition("=")
        if not eq:  # `--opt VALUE`: this is VALUE when an option comes before it
            if argument.startswith("-") or index == 0 or not arguments[index - 1].startswith("--"):
                out.append(argument)
                continue
            flag, value = arguments[index - 1], argument
        out.append((f"{flag}=" if eq else "") + _carry(flag, value, inputs))
    size = sum(len(content) for content in inputs.values())
    if size > CONFIGMAP_LIMIT:
        raise ValueError(f"the input files hold {size:,} bytes, more than a ConfigMap's "
                         f"{CONFIGMAP_LIMIT:,}: build them into the image and give their paths there")
    return out, inputs


def _carry(flag: str, value: str, inputs: dict[str, bytes]) -> str:
    """VALUE, or where it names a file, that file's path in the pods (its content in INPUTS)."""
    prefix, _, path_text = value.partition(":") if value.startswith("hist:") else ("", "", value)
    path = Path(path_text)
    if not path_text or flag == "--host":
        return value
    if path.is_dir():
        raise ValueError(f"{flag} names a folder ({path_text}): build it into the image, then "
                         "give its path there")
    if not path.is_file():
        return value
    key = f"{len(inputs)}-{path.name}"
    inputs[key] = path.read_bytes()
    return f"{prefix}:" * bool(prefix) + f"{INPUTS_DIR}/{key}"


def _is_loopback(host: str) -> bool:
    name = urlsplit(host).hostname or ""
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback or ipaddress.ip_address(name).is_unspecified
    except ValueError:
        return False
