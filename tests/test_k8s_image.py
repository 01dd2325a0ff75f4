"""The rig's own image (scripts/build_images.sh rig), which `rig k8s`'s pods run: a distributed
run inside it, the master and two worker processes against the pacing server, as a pod runs the
rendered command. Skipped with the reason where Docker or the image is missing."""

from __future__ import annotations

import contextlib
import csv
import io
import shlex
import subprocess

import pytest
import yaml

from loadtest.cli import k8s
from servers.images import RIG_IMAGE

pytestmark = pytest.mark.docker


def _missing() -> str | None:
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"no Docker engine ({exc})"
    if info.returncode != 0:
        return "no Docker engine reachable (run: bash scripts/docker_setup.sh)"
    found = subprocess.run(["docker", "images", "-q", RIG_IMAGE], capture_output=True, text=True)
    return None if found.stdout.strip() else f"no image {RIG_IMAGE} (run: bash scripts/build_images.sh rig)"


def test_the_image_runs_a_distributed_run_as_the_master_pod_would(tmp_path):
    why = _missing()
    if why:
        pytest.skip(why)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert k8s.main(["--engine", "vllm", "--host", "http://10.0.0.1:8100", "--users", "4",
                         "--requests", "32", "--max-tokens", "8", "--workers", "1",
                         "--worker-cpus", "2", "--hold-s", "0"]) == 0, err.getvalue()
    (master,) = [o for o in yaml.safe_load_all(out.getvalue())
                 if o["kind"] == "Job" and o["metadata"]["name"].endswith("master")]
    script = master["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    locust = shlex.split(script.split(";")[0])
    # in one container: the pacer stands in for the engine, the master's command (its host
    # pointed there, its workers as processes of its own) is the pod's
    locust[locust.index("--host") + 1] = "http://127.0.0.1:8100"
    cut = locust.index("--master")
    locust = locust[:cut] + ["--processes", "2"] + locust[cut + 3:]  # drop --master --expect-workers N
    inside = ("python -m loadtest.calibration.pacer --port 8100 --tokens 8 --gap-ms 5 "
              "> /tmp/pacer.log 2>&1 & sleep 2; " + shlex.join(locust) + " > /tmp/run.log 2>&1; "
              "code=$?; tail -n 5 /tmp/run.log >&2; cat /results/runs.csv; exit $code")
    done = subprocess.run(["docker", "run", "--rm", "--network", "none", "--tmpfs", "/results",
                           RIG_IMAGE, "sh", "-c", inside], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = list(csv.DictReader(io.StringIO(done.stdout)))
    assert (row["completed"], row["failed"], row["processes"]) == ("32", "0", "2")
