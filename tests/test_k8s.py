"""`rig k8s`: a distributed run's Kubernetes objects, checked against Kubernetes' published
schemas (kubernetes-validate, offline) and against the locustfile's own checks."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import shlex
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes_validate.utils import latest_version

from loadtest.cli import k8s
from loadtest.deploy import kubernetes
from loadtest.deploy.kubernetes import INPUTS_DIR, RESULTS_DIR, Deployment
from rig_helpers import locustfile_checks


def render(*argv: str) -> tuple[int, list[dict], str]:
    """(exit code, the objects, stderr) of `rig k8s ARGV`, in-process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = k8s.main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    objects = list(yaml.safe_load_all(out.getvalue())) if code == 0 else []
    return code, objects, err.getvalue()


def by_kind(objects: list[dict]) -> dict[str, dict]:
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in objects}


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "Say hello."}\n{"prompt": "Name three rivers."}\n')
    return path


def test_the_objects_fit_kubernetes_published_schemas(prompts: Path):
    code, objects, err = render("--engine", "vllm", "--host", "http://vllm.llm.svc:8000",
                                "--users", "64", "--requests", "512", "--prompts", str(prompts),
                                "--workers", "3", "--worker-cpus", "2", "--namespace", "bench",
                                "--api-key-secret", "engine-key")
    assert code == 0, err
    assert [o["kind"] for o in objects] == ["ConfigMap", "Service", "Job", "Job"]
    for obj in objects:
        kubernetes_validate.validate(obj, latest_version(), strict=True)
        assert obj["metadata"]["namespace"] == "bench"


def test_workers_hold_whole_cores_and_the_master_expects_each_process(prompts: Path):
    code, objects, err = render("--engine", "vllm", "--host", "http://10.0.0.5:8000",
                                "--prompts", str(prompts), "--workers", "3", "--worker-cpus", "2")
    assert code == 0, err
    objects_ = by_kind(objects)
    workers = objects_["Job/rig-run-workers"]["spec"]
    assert (workers["completions"], workers["parallelism"], workers["completionMode"]) == (3, 3, "Indexed")
    (worker,) = workers["template"]["spec"]["containers"]
    assert worker["resources"]["requests"] == worker["resources"]["limits"]
    assert worker["resources"]["limits"]["cpu"] == "2"
    assert worker["command"][worker["command"].index("--processes") + 1] == "2"
    assert worker["command"][worker["command"].index("--master-host") + 1] == "rig-run-master"
    master = master_command(objects)
    assert master[master.index("--expect-workers") + 1] == "6"
    service = objects_["Service/rig-run-master"]["spec"]
    assert service["selector"] == objects_["Job/rig-run-master"]["spec"]["template"]["metadata"]["labels"]


def test_the_masters_command_passes_the_locustfiles_checks(prompts: Path, tmp_path: Path):
    code, objects, err = render("--engine", "llamacpp", "--users", "16", "--requests", "64",
                                "--prompts", str(prompts), "--max-tokens", "32", "--ignore-eos")
    assert code == 0, err
    (config,) = [o for o in objects if o["kind"] == "ConfigMap"]
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for key, text in config["data"].items():  # the files as the pods see them, here
        (inputs / key).write_text(text)
    assert [p.read_text() for p in inputs.iterdir()] == [prompts.read_text()]
    args = [a.replace(INPUTS_DIR, str(inputs)).replace(RESULTS_DIR, str(tmp_path / "results"))
            for a in master_command(objects)[3:]]  # after `locust -f LOCUSTFILE`
    assert args[args.index("--host") + 1] == "http://llamacpp:8081"  # a Service named so
    done = locustfile_checks(*args)
    assert done.returncode == 0, done.stderr


def test_the_key_comes_from_the_secret_and_is_never_written(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, objects, err = render("--engine", "openai", "--model", "gpt-test", "--requests", "8",
                                "--max-spend-requests", "8", "--api-key-secret", "openai-key")
    assert code == 0, err
    for job in [o for o in objects if o["kind"] == "Job"]:
        (container,) = job["spec"]["template"]["spec"]["containers"]
        assert container["env"] == [{"name": "OPENAI_API_KEY", "valueFrom": {
            "secretKeyRef": {"name": "openai-key", "key": "api-key"}}}]
    assert "from Secret" not in yaml.safe_dump_all(objects)


def test_a_binary_input_travels_as_binary_data(tmp_path: Path):
    histogram = tmp_path / "lengths.txt"
    histogram.write_text("100 3\n200 1\n")
    dataset = tmp_path / "data.parquet"
    dataset.write_bytes(b"PAR1\xff\xfe not utf-8")
    args, inputs = k8s._carried([f"--dataset={dataset}", f"--input-len=hist:{histogram}"])
    assert args == [f"--dataset={INPUTS_DIR}/0-data.parquet",
                    f"--input-len=hist:{INPUTS_DIR}/1-lengths.txt"]
    deployment = Deployment(name="t", image="rig:1", workers=1, worker_cpus=1, worker_memory="1Gi",
                            master_cpus=1, master_memory="1Gi", hold_s=0)
    config = kubernetes.render(deployment, args, inputs)[0]
    assert config["data"] == {"1-lengths.txt": histogram.read_text()}
    assert base64.b64decode(config["binaryData"]["0-data.parquet"]) == dataset.read_bytes()
    kubernetes_validate.validate(config, latest_version(), strict=True)


@pytest.mark.parametrize("argv, message", [
    (["--host", "http://127.0.0.1:8000"], "as the pods reach it"),
    (["--host", "http://localhost:8000"], "as the pods reach it"),
    (["--processes", "2"], "--processes is decided by the objects"),
    (["--out", "results"], "--out is decided by the objects"),
    (["--client-cpus", "0"], "--client-cpus is decided by the objects"),
    (["--tokenizer", "/tmp"], "names a folder"),
    (["--", "--loglevel", "DEBUG"], "no Locust options"),
    (["--worker-memory", "lots"], "memory quantity"),
    (["--workers", "0"], "--workers must be a positive integer"),
])
def test_what_the_objects_cannot_run_is_one_line(argv: list[str], message: str):
    code, _, err = render("--engine", "vllm", *argv)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: "), err
    assert message in err and "Traceback" not in err


def test_inputs_too_large_for_a_configmap_are_refused(tmp_path: Path):
    big = tmp_path / "big.jsonl"
    big.write_text('{"prompt": "' + "x" * (k8s.CONFIGMAP_LIMIT + 10) + '"}\n')
    code, _, err = render("--engine", "vllm", "--prompts", str(big))
    assert code == 2 and "more than a ConfigMap's" in err, err


@settings(max_examples=40, deadline=None, database=None)
@given(name=st.text(min_size=1, max_size=50).filter(lambda t: not k8s._NAME.fullmatch(t)))
def test_a_name_kubernetes_would_refuse_is_refused_here(name: str):
    for option in ("--name", "--namespace", "--api-key-secret"):
        code, _, err = render("--engine", "vllm", option, name)
        assert code == 2 and err.startswith("error: ") and "Traceback" not in err, err


def master_command(objects: list[dict]) -> list[str]:
    (job,) = [o for o in objects if o["kind"] == "Job" and o["metadata"]["name"].endswith("master")]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    script = container["command"][-1]
    return shlex.split(script.split(";")[0])


@pytest.mark.parametrize("source", ["agentic", "trace"])
def test_a_trace_rig_run_refuses_is_refused_before_anything_is_rendered(tmp_path: Path, source: str):
    """The workload is built (its files checked) here, as the run will build it: a call with a
    negative time would otherwise surface only in the cluster's pods. Without --tokenizer the
    engine names the tokenizer, so only what no tokenizer decides is checked; that is enough."""
    if source == "agentic":
        session = json.loads((Path(__file__).parent / "data" / "agentic" / "session_a.json").read_text())
        session["requests"][0]["t"] = -1.0
        trace = tmp_path / "bad.json"
        trace.write_text(json.dumps(session))
        message = '"t" must be a number of seconds >= 0'
    else:
        trace = tmp_path / "bad.jsonl"
        trace.write_text('{"timestamp": 0, "input_length": 8, "output_length": 4}\n'
                         '{"timestamp": -5, "input_length": 8, "output_length": 4}\n')
        message = '"timestamp" must be a number of ms >= 0'
    code, _, err = render("--engine", "vllm", "--host", "http://vllm.llm.svc:8000",
                          "--workload", source, "--trace", str(trace), "--requests", "2")
    assert code == 2 and err.count("\n") == 1 and message in err, err
