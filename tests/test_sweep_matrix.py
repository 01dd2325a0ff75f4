"""Sweep matrices are checked whole before anything starts; cells are named and hashed stably.

No engine needed: these run in seconds.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from loadtest import cpus, local_engine
from loadtest.sweep import flags
from loadtest.sweep.cells import config_hash, expand_cells, flags_text
from loadtest.results.files import write_csv
from loadtest.sweep.matrix import MatrixError, parse_matrix
from loadtest.sweep.runner import print_tables
from loadtest.sweep.state import SweepState
from loadtest.sweep.table import RULES, cell_frame, comparison_table, config_table

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "sweeps").glob("*.yaml"))


def matrix(**engine: Any) -> dict[str, Any]:
    return {"name": "t", "workload": {"requests": 8, "max_tokens": 8}, "users": [1, 4],
            "engines": [{"engine": "vllm-cpu", "launch": "local", **engine}]}


def refusal(data: dict[str, Any], gpu_count: int | None = 0) -> str:
    with pytest.raises(MatrixError) as info:
        parse_matrix(data, gpu_count)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_refuses_an_unknown_engine() -> None:
    data = matrix()
    data["engines"][0] = {"engine": "nosuch"}
    assert "unknown engine 'nosuch'" in refusal(data)


def test_refuses_an_unknown_setting() -> None:
    assert "unknown setting 'MAX_NUM_SEQS'" in refusal(matrix(sweep={"MAX_NUM_SEQS": [2, 64]}))


def test_refuses_a_value_the_engine_does_not_accept() -> None:
    data = matrix()
    data["engines"][0] = {"engine": "tgi", "settings": {"DTYPE": "float32"}}
    assert "DTYPE must be one of float16, bfloat16" in refusal(data, gpu_count=1)
    assert "whole number >= 1" in refusal(matrix(sweep={"MAX_CONCURRENT_REQUESTS": [2, "lots"]}))


@pytest.mark.parametrize("host, said", [
    ("127.0.0.1:8000", "host must be an http(s) URL"), ("http://host:port", "host must be an http(s) URL"),
    ("http://user:s3cret@127.0.0.1:8000", "host must not carry a user name or password")])
def test_a_running_engines_host_is_checked_as_rig_run_checks_it(host: str, said: str) -> None:
    """Issue 37: the same check for --host whichever way a run starts; a password never shown."""
    data = matrix()
    data["engines"][0] = {"engine": "vllm-cpu", "host": host}
    message = refusal(data)
    assert said in message and "s3cret" not in message


def test_refuses_a_setting_the_engine_cannot_take() -> None:
    assert "vllm-cpu does not support SHARDS" in refusal(matrix(settings={"SHARDS": 2}))


def test_refuses_a_gpu_this_host_lacks() -> None:
    data = matrix()
    data["engines"][0] = {"engine": "tgi", "gpus": ["0,1"]}
    assert "needs GPU 0,1 but this host has no GPU" in refusal(data, gpu_count=0)
    assert "needs GPU 1 but this host has 1 GPU(s)" in refusal(data, gpu_count=1)
    parse_matrix(data, gpu_count=2)
    parse_matrix(data, gpu_count=None)  # dry run: presence not checked


def test_refuses_what_the_sweep_owns_and_bad_shapes() -> None:
    assert "PORT is set by the sweep" in refusal(matrix(settings={"PORT": 9000}))
    assert re.search(r"launch: local runs [a-z, -]*vllm-cpu[a-z, -]*, not tgi$", refusal(
        {**matrix(), "engines": [{"engine": "tgi", "launch": "local"}]}))
    assert "unknown key 'user'" in refusal({**matrix(), "user": [1]})
    assert "users must be a list" in refusal({**matrix(), "users": "many"})
    assert "no prompt file 'nope'" in refusal({**matrix(), "workload": {"prompts": "nope"}})
    assert "SHARDS=2 needs 2 GPUs" in refusal(
        {**matrix(), "engines": [{"engine": "vllm", "settings": {"SHARDS": 2}}]}, gpu_count=4)


@pytest.mark.parametrize("change, message", [
    ({"users": []}, "users must be a list of positive whole numbers"),
    ({"users": [4, 4]}, "users lists a value twice"),
    ({"users": ["x"]}, "users must be a whole number >= 1, got 'x'"),
    ({"engines": []}, "engines must be a non-empty list"),
    ({"engines": [{"engine": "vllm-cpu", "launch": "local"}] * 2}, "appears twice"),
    ({"engines": [{"engine": "vllm-cpu", "launch": "local",
                   "sweep": {"MAX_CONCURRENT_REQUESTS": []}}]}, "must be a non-empty list of values"),
    ({"engines": [{"engine": "vllm-cpu", "launch": "local",
                   "sweep": {"MAX_CONCURRENT_REQUESTS": [4, 4]}}]}, "lists a value twice"),
    ({"workload": {"requests": "x", "max_tokens": 8}},
     "workload.requests must be a positive integer"),
    ({"repeats": 0}, "repeats must be a whole number >= 1, got 0"),
])
def test_refuses_empty_lists_wrong_types_and_duplicate_cells(change: dict[str, Any],
                                                             message: str) -> None:
    assert message in refusal({**matrix(), **change})


def test_expands_engines_times_values_times_gpu_sets() -> None:
    data = matrix()
    data["engines"] = [{"engine": "tgi", "sweep": {"SPECULATE": [None, 2]}, "gpus": ["0", "1"]}]
    m = parse_matrix(data, gpu_count=2)
    plan = expand_cells(m, "sha")
    assert [slug for _, slug, _ in plan] == ["tgi-speculatenone", "tgi-speculatenone-gpu1",
                                            "tgi-speculate2", "tgi-speculate2-gpu1"]
    assert [c.name for c in plan[0][2]] == ["u1-r1", "u4-r1"]
    assert flags_text(plan[2][0]) == "SPECULATE=2"


def test_cell_ids_follow_settings_and_workload_not_paths() -> None:
    one = expand_cells(parse_matrix(matrix(sweep={"MAX_CONCURRENT_REQUESTS": [2]}), 0), "sha")
    again = expand_cells(parse_matrix(matrix(sweep={"MAX_CONCURRENT_REQUESTS": [2]}), 0), "sha")
    other_workload = expand_cells(parse_matrix(matrix(sweep={"MAX_CONCURRENT_REQUESTS": [2]}), 0), "sha2")
    other_value = expand_cells(parse_matrix(matrix(sweep={"MAX_CONCURRENT_REQUESTS": [4]}), 0), "sha")
    ids = [c.cell_id for c in one[0][2]]
    assert ids == [c.cell_id for c in again[0][2]]
    assert not set(ids) & {c.cell_id for c in other_workload[0][2]}
    assert not set(ids) & {c.cell_id for c in other_value[0][2]}
    assert config_hash(one[0][0]) != config_hash(other_value[0][0])


def test_resume_needs_same_rig_version_and_the_row(tmp_path: Path) -> None:
    cell = expand_cells(parse_matrix(matrix(), 0), "sha")[0][2][0]
    state = SweepState.open(tmp_path / "sweep.json", {"name": "t"})
    state.set_cell(cell, status="ok", run_id="R1", rig_version="v1")
    assert state.measured_before(cell, "v1", {"R1"}) == "measured before by run R1"
    assert state.measured_before(cell, "v2", {"R1"}) is None  # another rig version: run again
    assert state.resume_check(cell, "v2", {"R1"}) == (False, "measured by rig v1, this is v2")
    assert state.measured_before(cell, "v1", set()) is None  # row gone from runs.csv: run again
    reopened = SweepState.open(tmp_path / "sweep.json", {"name": "t"})
    assert reopened.measured_before(cell, "v1", {"R1"})


def test_table_marks_fastest_knee_and_unstable() -> None:
    rows = []
    for users, times, rates in ((1, (10, 10), (100, 100)), (16, (2.1, 2.1), (980, 980)),
                                (64, (2.0, 3.0), (1000, 700))):
        for repeat, (t, r) in enumerate(zip(times, rates), 1):
            rows.append({"run_id": f"{users}-{repeat}", "users": str(users), "repeat": str(repeat),
                         "completion_time_s": str(t), "output_tok_per_s": str(r), "failed": "0"})
    runs = cell_frame(rows, {r["run_id"]: "c" for r in rows})
    lines = config_table(runs).splitlines()
    assert lines[2].split()[0] == "16" and lines[2].endswith("* <- knee")  # 2.1 s < 2.5 s mean
    assert lines[3].split()[0] == "64" and "unstable" in lines[3]
    assert "*" not in lines[1]


def test_an_invalid_user_count_says_why_and_is_never_fastest_or_knee() -> None:
    """Measured on llama.cpp (evidence/2026-11-26/gpu-engines/workloads-llamacpp-8b-h100): its
    128-user prefill run was the higher throughput but invalid, and the table ranked it."""
    rows = [{"run_id": "a", "users": "32", "repeat": "1", "completion_time_s": "31.8",
             "output_tok_per_s": "257.7", "failed": "0", "verdict": "valid"},
            {"run_id": "b", "users": "128", "repeat": "1", "completion_time_s": "20.0",
             "output_tok_per_s": "900.0", "failed": "0", "verdict": "invalid",
             "verdict_reasons": "answers_arrived_whole;short_run"}]
    lines = config_table(cell_frame(rows, {"a": "c", "b": "c"})).splitlines()
    assert lines[1].split()[0] == "32" and lines[1].endswith("* <- knee")
    assert lines[2].endswith("1 of 1 invalid: answers_arrived_whole, short_run")
    assert "*" not in lines[2] and "knee" not in lines[2]
    only_invalid = config_table(cell_frame(rows[1:], {"b": "c"})).splitlines()
    assert "*" not in only_invalid[1] and "knee" not in only_invalid[1] and "invalid" in only_invalid[1]
    both = comparison_table(cell_frame([*rows, {**rows[0], "run_id": "c"}], {"a": "x", "b": "x", "c": "y"}))
    assert both.splitlines()[2].split()[1:] == ["20.00", "s", "!", "-"]  # 128 users: x's invalid run


def test_a_user_count_whose_api_server_was_saturated_says_so_with_its_busiest_share() -> None:
    """vLLM's four replicas on four H200s (evidence/2026-11-27/gpu-layouts, lease M): at 512
    users each replica's API server held 89-95% of a core; only the runs that carried the
    warning count, and the row names the highest share among them."""
    rows = [{"run_id": f"{users}-{repeat}", "users": str(users), "repeat": str(repeat),
             "completion_time_s": "7.9", "output_tok_per_s": str(rate), "failed": "0",
             "verdict": "valid", "engine_front_end_cpu_max_pct": str(share),
             "warnings": "short_run;front_end_saturated" if share > 90 else "short_run"}
            for users, rate, shares in ((256, 36276, (80.4, 74.7)), (512, 49581, (94.8, 95.4)))
            for repeat, share in enumerate(shares, 1)]
    lines = config_table(cell_frame(rows, {r["run_id"]: "c" for r in rows})).splitlines()
    assert "API server" not in lines[1]
    assert lines[2].split()[0] == "512" and lines[2].endswith("API server at 95%")
    assert "front_end_saturated" in RULES


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_matrices_pass_a_dry_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The first through the real process, the rest through the same main() in-process."""
    argv = [str(path), "--dry-run", "--out", str(tmp_path)]
    if path == EXAMPLES[0]:
        result = run_cli("loadtest.sweep.flags", *argv)
        code, stdout, stderr = result.returncode, result.stdout, result.stderr
    else:
        monkeypatch.chdir(REPO)
        code = flags.main(argv)
        stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    assert stdout.startswith("dry run: sweep ")
    assert "locust -f" in stdout and "nothing started" in stdout
    assert not any(tmp_path.iterdir())  # a dry run writes nothing


def test_client_processes_fork_the_client_and_keep_local_engines_off_its_cores(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`client_processes: N`: every run (warm-up included) is `--processes N`, and a local
    engine is started on the cores but the lowest N (loadtest/cpus.py default_layout)."""
    path = tmp_path / "m.yaml"
    path.write_text("name: forked\nworkload: {requests: 8, max_tokens: 8}\nusers: [4]\n"
                    "client_processes: 2\nengines:\n  - engine: vllm-cpu\n    launch: local\n")
    for module in (cpus, local_engine):  # a host of 16 cores
        monkeypatch.setattr(module, "allowed_cpus", lambda: set(range(16)))
    monkeypatch.chdir(REPO)
    assert flags.main([str(path), "--dry-run", "--out", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.splitlines()
    runs = [line for line in lines if line.startswith(("warm-up:", "u4-r1"))]
    assert len(runs) == 2 and all("--processes 2" in line for line in runs), lines
    assert any(line.startswith("start: ") and "taskset -c 2-15 " in line for line in lines), lines
    for bad in (0, -1, "two", True, 1.5):
        refused = refusal({**yaml.safe_load(path.read_text()), "client_processes": bad})
        assert refused.endswith(f"client_processes must be a whole number >= 1, got {bad!r}")


def test_a_bad_matrix_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nusers: [1]\nengines:\n  - engine: vllm-cpu\n    sweep: {SPECULATE: [1, 1]}\n")
    result = run_cli("loadtest.sweep.flags", str(bad))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert "lists a value twice" in result.stderr
    missing = run_cli("loadtest.sweep.flags", str(tmp_path / "none.yaml"))
    assert missing.returncode == 2 and "cannot read matrix" in missing.stderr


def test_scripts_refuse_missing_arguments_in_one_line_and_help_exits_0() -> None:
    for script in ("sweep_threads.sh", "sweep_flags.sh"):
        path = str(REPO / "scripts" / script)
        result = subprocess.run(["bash", path], capture_output=True, text=True)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
        helped = subprocess.run(["bash", path, "--help"], capture_output=True, text=True)
        assert helped.returncode == 0 and helped.stdout.startswith(f"usage: scripts/{script}")


def test_the_comparison_marks_a_fastest_configuration_only_among_two_that_count() -> None:
    """Issue 37's rule, in the sweep's comparison table: a configuration whose runs failed
    requests or were invalid is shown but never starred, and a user count where one
    configuration is left has no `*` at all (it was the fastest of one)."""
    rows = []
    for config, users, seconds, failed, verdict in (
            ("a", 8, 2.0, "0", "valid"), ("b", 8, 3.0, "0", "valid"),
            ("a", 32, 1.0, "0", "invalid"), ("b", 32, 4.0, "0", "valid"),
            ("a", 64, 1.0, "3", "valid"), ("b", 64, 6.0, "0", "")):
        rows.append({"run_id": f"{config}{users}", "users": str(users), "repeat": "1",
                     "completion_time_s": str(seconds), "output_tok_per_s": "100",
                     "failed": failed, "verdict": verdict})
    table = comparison_table(cell_frame(rows, {r["run_id"]: r["run_id"][0] for r in rows}))
    lines = {line.split()[0]: line for line in table.splitlines()[1:]}
    assert lines["8"].split() == ["8", "2.00", "s", "*", "3.00", "s"]
    assert "*" not in lines["32"] and "*" not in lines["64"]
    assert lines["32"].split() == ["32", "1.00", "s", "!", "4.00", "s"]  # none of a's counts


def test_the_comparison_averages_the_runs_that_count_and_says_when_some_were_left_out() -> None:
    """A mean beside another is of the runs that count: an invalid 1 s run must not make a
    configuration of two 3 s runs look faster than one of 2.5 s."""
    rows = [{"run_id": f"{config}{repeat}", "users": "8", "repeat": str(repeat),
             "completion_time_s": str(seconds), "output_tok_per_s": "100", "failed": "0",
             "verdict": verdict}
            for config, repeat, seconds, verdict in (("a", 1, 3.0, "valid"), ("a", 2, 3.0, "valid"),
                                                     ("a", 3, 1.0, "invalid"), ("b", 1, 2.5, "valid"),
                                                     ("b", 2, 2.5, "valid"), ("b", 3, 2.5, "valid"))]
    table = comparison_table(cell_frame(rows, {r["run_id"]: r["run_id"][0] for r in rows}))
    assert table.splitlines()[1].split() == ["8", "3.00", "s", "~", "2.50", "s", "*"]


def test_each_workload_gets_its_own_comparison(tmp_path: Path) -> None:
    """Completion times of two workloads never meet: a short prefill run is not `fastest`
    beside a long decode run of another configuration."""
    data = {**matrix(sweep={"MAX_CONCURRENT_REQUESTS": [2, 4]}), "users": [8],
            "workloads": {"long": {"max_tokens": 64}, "short": {"max_tokens": 4}}}
    m = parse_matrix(data, 0)
    plan = expand_cells(m, {})
    seconds = {("vllm-cpu-maxnumseqs2", "long"): 9.0, ("vllm-cpu-maxnumseqs4", "long"): 8.0,
               ("vllm-cpu-maxnumseqs2", "short"): 1.0, ("vllm-cpu-maxnumseqs4", "short"): 2.0}
    state = SweepState.open(tmp_path / "sweep.json", {})
    rows = []
    for _, slug, cells in plan:
        for cell in cells:
            run_id = f"{slug}-{cell.workload.label}"
            state.set_cell(cell, status="ok", run_id=run_id)
            rows.append({"run_id": run_id, "users": "8", "repeat": "1", "failed": "0", "verdict": "valid",
                         "completion_time_s": str(seconds[slug, cell.workload.label]),
                         "output_tok_per_s": "100"})
    write_csv(tmp_path / "runs.csv", list(rows[0]), rows)
    (tmp_path / "sweeps/t").mkdir(parents=True)
    print_tables(state, plan, tmp_path, m)
    compared = (tmp_path / "sweeps/t/table.txt").read_text().split("fastest per user count):")[1]
    long, short = compared.split("-- workload short")
    assert long.splitlines()[3].split() == ["8", "9.00", "s", "8.00", "s", "*"]
    assert short.splitlines()[2].split() == ["8", "1.00", "s", "*", "2.00", "s"]


def two_layouts(second_gpus: str, launch: str = "local") -> dict[str, Any]:
    """Two vLLM layouts to be started together: one per GPU on 0,1 and one split elsewhere."""
    return {"name": "t", "workload": {"requests": 8, "max_tokens": 8}, "users": [8],
            "repeats": 2, "interleave_repeats": "together",
            "engines": [{"engine": "vllm", "launch": "local", "gpus": ["0,1"], "replicas": "per-gpu"},
                        {"engine": "vllm", "launch": launch, "gpus": [second_gpus],
                         "settings": {"SHARDS": 2}}]}


def test_together_needs_gpus_of_its_own_for_each_configuration_and_local_processes() -> None:
    together = parse_matrix(two_layouts("2,3"), gpu_count=4)
    assert together.start_together and together.interleave_repeats
    shared = refusal(two_layouts("1,2"), gpu_count=4)
    assert "both use GPU 1" in shared and "interleave_repeats: true" in shared
    assert "not vllm through Compose" in refusal(two_layouts("2,3", launch="compose"), gpu_count=4)
    # CPU engines may share the host's cores: the one measured runs while the others idle
    cpu = {**matrix(sweep={"MAX_CONCURRENT_REQUESTS": [2, 4]}), "interleave_repeats": "together"}
    assert parse_matrix(cpu, 0).start_together
    for bad in ("yes", "Together", 1, None, [True]):
        assert refusal({**matrix(), "interleave_repeats": bad}).endswith(
            f"interleave_repeats must be true, false or together, got {bad!r}")


def test_the_dry_run_of_a_together_matrix_says_so_and_gives_each_engine_its_own_port(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(two_layouts("2,3")))
    monkeypatch.chdir(REPO)
    assert flags.main([str(path), "--dry-run", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "configurations started together, each on its own GPUs" in out.splitlines()[0]
    ports = re.findall(r"--port (\d+)", out)
    assert len(ports) == 3 and len(set(ports)) == 3, out  # two replicas and the split server
