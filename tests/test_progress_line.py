"""The console's progress line (issue 36, "The console"): a real headless run against the pacing
server, as a person sees it in a terminal (a pseudo-terminal: the line rewrites itself in place)
and in a log (one line per interval), Locust's periodic tables gone and the summary at the end
as it was (the same lines as a --only-summary run's); and the line's figures, from records with
known stamps.

The three runs start together against one pacer (module fixture), so the file costs about one
run's time."""

from __future__ import annotations

import csv
import io
import os
import pty
import re
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from loadtest.launch.command import locust_command
from loadtest.live.progress import Progress, Snapshot, Tally, format_line, take_over_console
from loadtest.results.record import RequestRecord
from rig_helpers import REPO, running_pacer

REQUESTS = 16
INTERVAL_S = 0.2
LINE = re.compile(r"(\d+)/(\d+) requests (\d+)% \| \d+:\d\d(?:, ~\d+:\d\d left)? \| ([\d,]+) tok/s "
                  r"\| TTFT p50 ([\d.,]+|-) p99 ([\d.,]+|-) ms \| (\d+) failed \| cpu (\d+%|-)")


def _command(url: str, out: Path, *extra: str) -> list[str]:
    return locust_command(host=url, users=2, rig_options=[
        "--engine", "vllm", "--model", "pacer", "--requests", str(REQUESTS), "--max-tokens", "16",
        "--ignore-eos", "--telemetry-interval", "0", "--out", str(out), *extra])


def _in_a_terminal(cmd: list[str]) -> tuple[subprocess.Popen, int]:
    """`cmd` with stdout and stderr on a new pseudo-terminal; returns it and the reading end."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(cmd, cwd=REPO, stdin=subprocess.DEVNULL, stdout=terminal,
                               stderr=terminal, close_fds=True)
    os.close(terminal)
    return process, controller


def _read_all(process: subprocess.Popen, controller: int, timeout_s: float = 120) -> str:
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 0.5)
        if ready:
            try:
                data = os.read(controller, 65536)
            except OSError:  # EIO: the terminal's other end closed (Linux)
                break
            if not data:
                break
            chunks.append(data)
        elif process.poll() is not None:
            break
    os.close(controller)
    process.wait(10)
    return b"".join(chunks).decode(errors="replace")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[int, str, Path]]]:
    """{"tty": in a terminal, "log": piped, "summary": piped with --only-summary}: each one's
    exit code, output and results folder, from one pacer at once."""
    base = tmp_path_factory.mktemp("progress")
    with running_pacer("--ttft-ms", "5", "--gap-ms", "4") as url:
        interval = ["--progress-interval", str(INTERVAL_S)]
        tty, controller = _in_a_terminal(_command(url, base / "tty", *interval))
        piped = {name: subprocess.Popen(_command(url, base / name, *extra), cwd=REPO,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)
                 for name, extra in (("log", interval), ("summary", ["--only-summary"]))}
        out = {"tty": (0, _read_all(tty, controller), base / "tty")}
        for name, process in piped.items():
            text, _ = process.communicate(timeout=120)
            out[name] = (process.returncode, text, base / name)
        out["tty"] = (tty.returncode, out["tty"][1], base / "tty")
    yield out


def _summary(text: str) -> list[str]:
    """The rig's summary block, from `== llm-load-rig` to Locust's final tables, numbers, paths
    and run ids masked, the verdict's value, reasons and warnings left out (a loaded machine
    may judge two runs differently): what a run prints whatever it measured. (Locust's tables
    are as wide as the terminal, so they are only found, not compared.)"""
    block = text[text.index("== llm-load-rig"):].replace("\r\n", "\n")
    block = re.sub(r"verdict: \w+", "verdict:", block)
    lines = [line for line in block.splitlines()  # log lines, reasons, warnings
             if not line.startswith(("[", "  - ", "warning: "))]
    lines = lines[:next(i for i, line in enumerate(lines) if line.startswith("Type "))]
    assert block.count("Aggregated") == 2, block  # Locust's final stats and percentiles
    return [re.sub(r"\d[\d,.]*|/\S+", "#", line).rstrip() for line in lines]


def _completion_s(folder: Path) -> float:
    with (folder / "runs.csv").open(newline="") as file:
        return float(list(csv.DictReader(file))[-1]["completion_time_s"])


def test_in_a_terminal_the_line_rewrites_itself_and_reaches_the_total(runs):
    code, text, _ = runs["tty"]
    assert code == 0, text[-3000:]
    before = text[:text.index("== llm-load-rig")]
    lines = [m for m in LINE.finditer(before)]
    assert len(lines) >= 2, before[-2000:]  # one or more in flight, and the last
    assert all(text[m.start() - 1] == "\r" for m in lines), before[-2000:]  # in place
    done, total, pct, tok_s = (lines[-1].group(i) for i in range(1, 5))
    assert (int(done), int(total), pct) == (REQUESTS, REQUESTS, "100")
    assert float(tok_s.replace(",", "")) > 0
    assert float(lines[-1].group(5)) > 0 and float(lines[-1].group(6)) >= float(lines[-1].group(5))
    assert lines[-1].group(7) == "0"
    counts = [int(m.group(1)) for m in lines]
    assert counts == sorted(counts), counts  # done never goes back
    assert before.rstrip("\r\n").endswith("\x1b[K"), repr(before[-200:])  # the last line ended
    # a Locust log line after a line in flight starts on its own line
    assert not re.search(r"cpu (\d+%|-)\x1b\[K\[", text), repr(text[-3000:])


def test_locusts_periodic_tables_are_gone_and_the_summary_is_as_it_was(runs):
    for name in ("tty", "log"):
        code, text, _ = runs[name]
        assert code == 0, text[-3000:]
        before = text[:text.index("== llm-load-rig")]
        assert "Aggregated" not in before, before[-2000:]  # no table while it ran
        assert _summary(text) == _summary(runs["summary"][1]), text[-3000:]
    assert not LINE.search(runs["summary"][1])  # --only-summary: the race's, sweeps': no line


def test_in_a_log_it_is_one_line_per_interval(runs):
    code, text, folder = runs["log"]
    assert code == 0, text[-3000:]
    before = text[:text.index("== llm-load-rig")]
    assert "\r" not in before and "\x1b" not in before
    lines = [line for line in before.splitlines() if LINE.fullmatch(line)]
    assert lines[-1].startswith(f"{REQUESTS}/{REQUESTS} requests 100%"), before[-2000:]
    # the periodic lines (the last is the end's): at most one per interval of the run, with
    # the spawn before it and a little slack; at least one on any machine (a run of >0.5 s)
    periodic = len(lines) - 1
    assert 1 <= periodic <= _completion_s(folder) / INTERVAL_S + 8, (periodic, before[-2000:])


def _record(i: int, ttft_ms: float, tokens: int = 10, error: str | None = None) -> RequestRecord:
    sent = 1_000_000_000 * (i + 1)
    return RequestRecord(i, f"p{i}", 1000.0 + i, sent, first_chunk_ns=sent + round(ttft_ms * 1e6),
                         done_ns=sent + 10**8, output_tokens=tokens, error_kind=error)


def test_the_figures_are_the_records_own():
    """TTFT percentiles as numpy's linear method over completed requests, tokens of completed
    requests only, failures by kind; each record read once however often the line is drawn."""
    records = [_record(i, float(i + 1)) for i in range(100)]
    records += [_record(100, 5000.0, error="timeout"), _record(101, 1.0, error="truncated")]
    tally = Tally()
    tally.update(records[:50])
    tally.update(records)
    tally.update(records)
    assert tally.done == 102 and tally.output_tokens == 1000
    assert tally.ttft_ms(50) == pytest.approx(50.5) and tally.ttft_ms(99) == pytest.approx(99.01)
    assert dict(tally.errors) == {"timeout": 1, "truncated": 1}
    assert tally.first_sent_at == 1000.0
    line = format_line(Snapshot(elapsed_s=10.0, done=102, total=400, output_tokens=1000,
                                ttft_p50_ms=50.5, ttft_p99_ms=99.01, errors=dict(tally.errors),
                                cpu_pct=37.4))
    assert line == ("102/400 requests 26% | 0:10, ~0:29 left | 100 tok/s | TTFT p50 50 p99 99 ms | "
                    "2 failed (timeout 1, truncated 1) | cpu 37%")
    timed = format_line(Snapshot(elapsed_s=65.0, done=1532, total=None, duration_s=180.0,
                                 output_tokens=152_425, ttft_p50_ms=5.25, cpu_pct=None))
    assert timed == ("1:05/3:00 36%, ~1:55 left | 1,532 requests | 2,345 tok/s | TTFT p50 5.2 "
                     "p99 - ms | 0 failed | cpu -")
    drain = Snapshot(elapsed_s=181.0, done=4200, total=None, duration_s=180.0, in_flight=3)
    assert format_line(drain).startswith("3:00/3:00 100%, finishing 3 in flight | 4,200 requests")
    over = Snapshot(elapsed_s=181.4, done=4203, total=None, duration_s=180.0)
    assert format_line(over).startswith("3:00/3:00 100%, done | 4,203 requests")
    sessions = Snapshot(elapsed_s=30.0, done=12, total=50, unit="sessions", turns=96)
    assert format_line(sessions).startswith("12/50 sessions 24% (96 turns) | 0:30, ~1:35 left")


class _Pipe(io.StringIO):
    """A console that goes away (a pipe into `head`) after `lines` lines."""

    def __init__(self, lines: int) -> None:
        super().__init__()
        self.lines = lines

    def write(self, text: str) -> int:
        if self.getvalue().count("\n") >= self.lines:
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(text)


def test_a_console_that_goes_away_ends_the_lines_not_the_run():
    """Run.finish closes the line before the summary: a closed pipe must not raise there."""
    run = SimpleNamespace(
        records=[_record(i, 5.0) for i in range(3)], workload=SimpleNamespace(),
        dispatcher=SimpleNamespace(run_origin_ns=time.perf_counter_ns() - 10**9, in_flight=0,
                              worker_cpu_pct={}),
        timing=SimpleNamespace(duration_s=None), config=SimpleNamespace(requests=10),
        environment=SimpleNamespace(runner=SimpleNamespace()), cpu=SimpleNamespace(last_pct=3.0))
    pipe = _Pipe(lines=1)
    progress = Progress(run, 60.0, stream=pipe).start()
    progress._print(end=False)
    run.records.append(_record(3, 6.0))
    progress._print(end=False)  # the pipe is gone: no error, no more lines
    progress.close()
    assert pipe.getvalue().startswith("3/10 requests 30% | 0:01, ~0:02 left | ")
    assert pipe.getvalue().count("\n") == 1


@pytest.mark.parametrize("given, shown", [
    ({"headless": True}, 5.0), ({"headless": True, "progress_interval": "0.5"}, 0.5),
    ({"headless": True, "progress_interval": "0"}, None),
    ({"headless": True, "only_summary": True}, None), ({"headless": True, "print_stats": True}, None),
    ({"headless": False}, None), ({"headless": True, "worker": True}, None)])
def test_who_prints_the_line(given: dict, shown: float | None):
    """A headless master or single process, unless --print-stats (Locust's tables) or
    --only-summary (neither) or an interval of 0; Locust's tables are turned off only then."""
    options = type("Options", (), {"only_summary": False, "print_stats": False, **given})()
    assert take_over_console(options) == shown
    assert options.only_summary is (shown is not None or bool(given.get("only_summary")))
