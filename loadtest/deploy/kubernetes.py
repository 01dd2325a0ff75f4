"""A distributed run as Kubernetes objects: the Locust master as a Job behind a Service, its
workers as an indexed Job, the options' input files as a ConfigMap.

    render(Deployment(...), locust_args, inputs) -> [ConfigMap, Service, Job, Job] (dicts)

The master runs the locustfile with the run's options exactly as `rig run` would hand them to
Locust (loadtest/cli/run.py), `--master --expect-workers W*P`, its results in /results; each
worker pod is `locust --worker --processes P` on P whole cores (CPU request = limit, so a
Guaranteed pod gets cores of its own under the static CPU manager). The master holds its pod for
`hold_s` after the run so `kubectl cp` can take the results, then exits with the run's code.
"""

from __future__ import annotations

import base64
import shlex
from dataclasses import dataclass
from typing import Any

__all__ = ["INPUTS_DIR", "LOCUSTFILE", "LOCUST_PORT", "RESULTS_DIR", "Deployment", "render"]

LOCUST_PORT = 5557  # Locust's master port (--master-bind-port's default)
RESULTS_DIR = "/results"
INPUTS_DIR = "/rig/inputs"
LOCUSTFILE = "/rig/loadtest/engines.py"  # the image's checkout (WORKDIR /rig)


@dataclass(frozen=True)
class Deployment:
    name: str  # the objects' prefix: NAME-master, NAME-workers, NAME-inputs
    image: str
    workers: int  # worker pods
    worker_cpus: int  # whole cores a worker pod holds; its Locust processes
    worker_memory: str
    master_cpus: int
    master_memory: str
    hold_s: int
    namespace: str | None = None
    api_key_secret: str | None = None  # a Secret's name; its key api-key becomes api_key_env
    api_key_env: str = "LLM_API_KEY"

    @property
    def processes(self) -> int:
        return self.workers * self.worker_cpus


def render(deployment: Deployment, locust_args: list[str], inputs: dict[str, bytes]
           ) -> list[dict[str, Any]]:
    """The objects, in the order `kubectl apply -f` should create them. `locust_args`: the
    master's arguments after `locust -f LOCUSTFILE` (input files already at INPUTS_DIR/KEY);
    `inputs`: those files' contents by KEY."""
    return [_inputs(deployment, inputs), _service(deployment), _master(deployment, locust_args),
            _workers(deployment)]


def _meta(deployment: Deployment, suffix: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"{deployment.name}-{suffix}",
                            "labels": {"app.kubernetes.io/name": "llm-load-rig",
                                       "app.kubernetes.io/instance": deployment.name,
                                       "app.kubernetes.io/component": suffix}}
    if deployment.namespace:
        meta["namespace"] = deployment.namespace
    return meta


def _inputs(deployment: Deployment, inputs: dict[str, bytes]) -> dict[str, Any]:
    data, binary = {}, {}
    for key, content in sorted(inputs.items()):
        try:
            data[key] = content.decode("utf-8")
        except UnicodeDecodeError:
            binary[key] = base64.b64encode(content).decode("ascii")
    config: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": _meta(deployment, "inputs"), "data": data}
    if binary:
        config["binaryData"] = binary
    return config


def _service(deployment: Deployment) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(deployment, "master"),
            "spec": {"selector": _selector(deployment, "master"),
                     "ports": [{"name": "locust", "port": LOCUST_PORT,
                                "targetPort": LOCUST_PORT, "protocol": "TCP"}]}}


def _master(deployment: Deployment, locust_args: list[str]) -> dict[str, Any]:
    locust = ["locust", "-f", LOCUSTFILE, *locust_args, "--master",
              "--expect-workers", str(deployment.processes), "--out", RESULTS_DIR]
    script = (f"{shlex.join(locust)}; code=$?; "
              f'echo "results in $HOSTNAME:{RESULTS_DIR} for {deployment.hold_s} s: '
              f'kubectl cp $HOSTNAME:{RESULTS_DIR} ./results"; '
              f"sleep {deployment.hold_s}; exit $code")
    container = _container(deployment, "master", ["sh", "-c", script],
                           deployment.master_cpus, deployment.master_memory)
    container["ports"] = [{"name": "locust", "containerPort": LOCUST_PORT}]
    container["volumeMounts"] = [{"name": "results", "mountPath": RESULTS_DIR},
                                 {"name": "inputs", "mountPath": INPUTS_DIR, "readOnly": True}]
    pod = _pod(deployment, "master", container)
    pod["spec"]["volumes"] = [{"name": "results", "emptyDir": {}},
                              {"name": "inputs",
                               "configMap": {"name": f"{deployment.name}-inputs"}}]
    return _job(deployment, "master", pod, completions=1)


def _workers(deployment: Deployment) -> dict[str, Any]:
    locust = ["locust", "-f", LOCUSTFILE, "--worker", "--processes", str(deployment.worker_cpus),
              "--master-host", f"{deployment.name}-master", "--master-port", str(LOCUST_PORT)]
    container = _container(deployment, "worker", locust, deployment.worker_cpus,
                           deployment.worker_memory)
    container["volumeMounts"] = [{"name": "inputs", "mountPath": INPUTS_DIR, "readOnly": True}]
    pod = _pod(deployment, "workers", container)
    pod["spec"]["volumes"] = [{"name": "inputs",
                               "configMap": {"name": f"{deployment.name}-inputs"}}]
    job = _job(deployment, "workers", pod, completions=deployment.workers)
    job["spec"]["completionMode"] = "Indexed"
    return job


def _container(deployment: Deployment, name: str, command: list[str], cpus: int,
               memory: str) -> dict[str, Any]:
    resources = {"cpu": str(cpus), "memory": memory}
    container = {"name": name, "image": deployment.image, "imagePullPolicy": "IfNotPresent",
                 "workingDir": "/rig", "command": command,
                 "resources": {"requests": dict(resources), "limits": dict(resources)}}
    if deployment.api_key_secret:
        container["env"] = [{"name": deployment.api_key_env, "valueFrom": {"secretKeyRef": {
            "name": deployment.api_key_secret, "key": "api-key"}}}]
    return container


def _pod(deployment: Deployment, component: str, container: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"labels": _selector(deployment, component)},
            "spec": {"restartPolicy": "Never", "containers": [container]}}


def _job(deployment: Deployment, component: str, pod: dict[str, Any], completions: int
         ) -> dict[str, Any]:
    # backoffLimit 0: a run that failed is not run again (its requests were sent once already)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(deployment, component),
            "spec": {"completions": completions, "parallelism": completions, "backoffLimit": 0,
                     "template": pod}}


def _selector(deployment: Deployment, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/instance": deployment.name,
            "app.kubernetes.io/component": component}
