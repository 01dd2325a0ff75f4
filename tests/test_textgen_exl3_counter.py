"""How the rig counts output tokens on text-generation-webui's ExLlamav3 loader, which has no
llama-server: exllamav3's own count of each finished job's tokens, served by the boot shim
(servers/textgen-cpu/exl3_counter.py) where the rig reads the llama.cpp loader's counter.

exllamav3 runs on an NVIDIA GPU alone, so its Generator is stood in for by a class whose iterate
returns results shaped as exllamav3 1.6.5's (exllamav3/generator/job.py: a job's last result is
marked ``eos`` and carries ``new_tokens``); the server, the reads and the row are the rig's own.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from loadtest.telemetry.output_counter import SOURCE, counted_by_engine, read_output_counter
from servers import textgen

SHIM = Path(textgen.BOOT).with_name("exl3_counter.py")


def _shim() -> ModuleType:
    spec = importlib.util.spec_from_file_location("exl3_counter", SHIM)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _api_port() -> int:
    """An API port free now, its counter port (+5) too (boot.py checks the API port itself)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            api = probe.getsockname()[1] - textgen.INNER_PORT_OFFSET
        if api > 1024 and all(_free(port) for port in (api, api + textgen.INNER_PORT_OFFSET)):
            return api


def _free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as boot.py probes
        try:
            probe.bind(("", port))
        except OSError:
            return False
        return True


class _Generator:
    """exllamav3's Generator as the loader's thread calls it: each iterate, one result a job in
    flight; a job's last result is marked eos, carries its last text and its new_tokens."""

    def __init__(self, jobs: int, tokens: int) -> None:
        self.steps = [[{"job": j, "eos": step == tokens, "text": "x",
                        **({"new_tokens": tokens} if step == tokens else {})} for j in range(jobs)]
                      for step in range(1, tokens + 1)]

    def iterate(self) -> list[dict[str, Any]]:
        return self.steps.pop(0) if self.steps else []


def test_the_shim_names_the_counter_and_port_the_rig_reads() -> None:
    shim = _shim()
    assert (shim.NAME, shim.PORT_OFFSET) == (textgen.EXL3_NEW_TOKENS, textgen.INNER_PORT_OFFSET)
    assert textgen.TARGET.output_tokens_counter == ((textgen.PREDICTED_TOKENS, textgen.EXL3_NEW_TOKENS),
                                                   textgen.INNER_PORT_OFFSET)


def test_a_16_by_32_run_on_exllamav3_counts_512_from_exllamav3_and_is_not_unequal_work() -> None:
    shim, api = _shim(), _api_port()
    counter = shim.Counter()
    server = shim.serve(counter, api + shim.PORT_OFFSET)
    try:
        shim.count_iterations(_Generator, counter)
        generator = _Generator(jobs=16, tokens=32)
        url = f"http://127.0.0.1:{api}"
        before = read_output_counter(url, textgen.TARGET)
        while generator.iterate():
            pass
        after = read_output_counter(url, textgen.TARGET)
    finally:
        server.shutdown()
    assert (before, after) == (0.0, 512.0)
    row = {"completed": 16, "requests_sent": 16, "failed": 0, "completion_time_s": 2.0, "max_tokens": 32,
           "output_tokens": 496, "output_tokens_source": "usage", "min_output_tokens": 31, "max_output_tokens": 31}
    row.update(counted_by_engine(row, before, after))
    assert (row["output_tokens"], row["output_tokens_source"], row["output_tok_per_s"]) == (512, SOURCE, 256.0)
    assert (row["min_output_tokens"], row["max_output_tokens"]) == (32, 32)


def test_a_cancelled_job_is_not_counted() -> None:
    counter = _shim().Counter()
    counter.add([{"job": 0, "eos": False, "text": "x"}, {"job": 1, "eos": True, "new_tokens": 7}])
    assert counter.total == 7


@pytest.mark.parametrize("served, read", [
    ("llamacpp:tokens_predicted_total 512\n", 512.0),            # the llama.cpp loader's llama-server
    ("exllamav3:new_tokens_total 512\n", 512.0),                 # the ExLlamav3 loader's shim
    ("llamacpp:prompt_tokens_total 99\n", None)])                # neither: the row stays on usage
def test_the_counter_read_is_the_one_the_loader_serves(served: str, read: float | None) -> None:
    shim, api = _shim(), _api_port()

    class Fixed(shim.Counter):  # type: ignore[name-defined, misc]
        def metrics(self) -> bytes:
            return served.encode()

    server = shim.serve(Fixed(), api + textgen.INNER_PORT_OFFSET)
    try:
        assert read_output_counter(f"http://127.0.0.1:{api}", textgen.TARGET) == read
    finally:
        server.shutdown()


def test_without_exllamav3_the_shim_warns_and_counts_nothing() -> None:
    if importlib.util.find_spec("exllamav3") is not None:
        pytest.skip("exllamav3 is installed here")
    warnings: list[str] = []
    assert _shim().start(_api_port(), warnings.append) is None
    assert len(warnings) == 1 and warnings[0].startswith("exllamav3 does not import")


def test_a_taken_counter_port_is_a_warning_and_the_runs_stay_on_usage(monkeypatch: pytest.MonkeyPatch) -> None:
    shim, api = _shim(), _api_port()
    exllamav3 = ModuleType("exllamav3")
    exllamav3.Generator = _Generator  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "exllamav3", exllamav3)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", api + shim.PORT_OFFSET))
        taken.listen()
        warnings: list[str] = []
        assert shim.start(api, warnings.append) is None
    assert len(warnings) == 1 and "runs count usage instead" in warnings[0]


@pytest.mark.parametrize("loader, warned", [("ExLlamav3", True), ("ExLlamav3_HF", False), ("llama.cpp", False)])
def test_boot_starts_the_counter_for_the_exllamav3_loader_alone(tmp_path: Path, loader: str, warned: bool) -> None:
    """boot.py, run as textgen's interpreter runs it, in front of a server.py that only says it ran
    (exllamav3 is not installed here: the shim's start warns, and textgen starts all the same)."""
    if importlib.util.find_spec("exllamav3") is not None:
        pytest.skip("exllamav3 is installed here")
    (tmp_path / "server.py").write_text("print('server.py ran')\n")
    (tmp_path / "modules").mkdir()  # what boot.py wraps before server.py runs
    (tmp_path / "modules" / "models.py").write_text("def load_model(*args):\n    return None, None\n")
    done = subprocess.run([sys.executable, str(textgen.BOOT), str(tmp_path), "--api-port", str(_api_port()),
                           "--loader", loader], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "server.py ran\n"), done.stderr[-1500:]
    assert done.stderr.startswith("warning: exllamav3 does not import") == warned, done.stderr
