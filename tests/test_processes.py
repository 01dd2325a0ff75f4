"""Stopping what the rig started (loadtest/launch/processes.py, loadtest/local_engine.py): a fake
engine whose processes ignore SIGTERM, fork children, or leave its process group is gone after
one stop, also when the stop is interrupted; an engine dies with the rig that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rig_helpers import REPO, wait_for

from loadtest.launch.processes import stop_process_group

# A fake engine: its first process forks a child (which leaves the group with --escape), both
# ignore SIGTERM, and the child's pid is written once both are set up.
_ENGINE = textwrap.dedent("""
    import os, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.fork() == 0:
        if "--escape" in sys.argv:
            os.setsid()
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        time.sleep(600)
    time.sleep(600)
""")


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by init, counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def fake_engine(tmp_path: Path) -> Iterator[Callable[..., tuple[subprocess.Popen[bytes], int]]]:
    """Starts the fake engine: (its first process, its child's pid); whatever a failed test left
    of them is killed afterwards."""
    started: list[int] = []

    def start(*flags: str) -> tuple[subprocess.Popen[bytes], int]:
        pid_file = tmp_path / "child.pid"
        engine = subprocess.Popen([sys.executable, "-c", _ENGINE, str(pid_file), *flags],
                                  start_new_session=True)
        started.append(engine.pid)
        wait_for(pid_file.exists, "the fake engine's child", timeout_s=30, poll_s=0.02)
        started.append(int(pid_file.read_text()))
        return engine, started[-1]

    yield start
    for pid in started:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("flags", [(), ("--escape",)], ids=["in-group", "left-its-group"])
def test_an_engine_ignoring_sigterm_and_its_child_are_gone_after_one_stop(fake_engine, flags):
    engine, child = fake_engine(*flags)
    stop_process_group(engine, grace_s=0.3, kill_wait_s=5)
    assert engine.returncode == -signal.SIGKILL
    wait_for(lambda: not _alive(child), "the child's end", timeout_s=5, poll_s=0.02)


def test_an_interrupted_stop_kills_what_is_left_before_it_goes_on_up(fake_engine):
    """A second Ctrl-C (or the race's SIGTERM) while the stop waits out its grace period. In a
    process of its own, as the rig's commands stop engines: this one has Locust's gevent patching
    (tests/rig_helpers.py), whose hub may swallow a KeyboardInterrupt raised while it waits."""
    engine, child = fake_engine()
    script = textwrap.dedent(f"""
        import signal, sys
        from loadtest.launch.processes import stop_process_group

        def interrupt(_signum, _frame):
            raise KeyboardInterrupt

        signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        try:
            stop_process_group({engine.pid}, grace_s=60)
        except KeyboardInterrupt:
            print("interrupted")
            sys.exit(0)
        print("not interrupted")
        sys.exit(1)
    """)
    stopper = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                             timeout=120)
    assert (stopper.returncode, stopper.stdout.strip()) == (0, "interrupted"), stopper.stderr[-2000:]
    assert engine.wait(timeout=5) == -signal.SIGKILL
    wait_for(lambda: not _alive(child), "the child's end", timeout_s=5, poll_s=0.02)


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("detached", [False, True])
def test_an_engine_dies_with_the_rig_killed_before_it_could_stop_it(tmp_path: Path, detached):
    """SIGKILL, SIGHUP or the OOM killer run no `finally`: the kernel sends the engine SIGTERM
    (LocalEngine's default); `rig engine start`'s engine (detached) outlives it."""
    pid_file = tmp_path / "engine.pid"
    rig = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import dataclasses, time
        from pathlib import Path
        from loadtest.launch.processes import free_port
        from loadtest.local_engine import LocalEngine
        engine = LocalEngine(free_port(), engine="llamacpp-cpu", detached={detached},
                             log_path=Path({str(tmp_path / "log")!r}))
        engine.recipe = dataclasses.replace(  # the fake engine: nothing to install
            engine.recipe, command=lambda port, extra: ["sleep", "600"], missing=lambda: None)
        engine.launch()
        open({str(pid_file)!r}, "w").write(str(engine.process.pid))
        time.sleep(600)
    """)], cwd=REPO, env={**os.environ, "RIG_STATE_DIR": str(tmp_path / "state")})
    try:
        wait_for(lambda: pid_file.exists() and pid_file.read_text(), "the engine's start",
                 timeout_s=30, poll_s=0.02)
        engine = int(pid_file.read_text())
        assert _alive(engine)
        rig.kill()
        rig.wait()
        if detached:
            assert _alive(engine)
        else:
            wait_for(lambda: not _alive(engine), "the engine's end", timeout_s=5, poll_s=0.02)
    finally:
        rig.kill()
        if pid_file.exists() and pid_file.read_text() and _alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
