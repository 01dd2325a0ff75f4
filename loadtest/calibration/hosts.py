"""Separate hosts on this machine: each a network namespace with its own address on one bridge,
so the rig's distributed runs cross a real network stack (their own loopback, routes and links),
not 127.0.0.1. Root only; `Hosts.missing()` says why they cannot be made here. The calibration's
`--worker-hosts` and the distributed-run tests make them.

    with Hosts(["engine", "master", "w1"]) as hosts:
        server = hosts.popen("engine", [...])          # runs inside that namespace
        hosts.address("engine")                        # "10.77.N.1"
        hosts.cut("w1")                                # its link down: the host is lost
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["Hosts"]

_MADE = itertools.count()


class Hosts:
    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        made = next(_MADE)  # two networks at once, or one made as the last is torn down, differ
        self._name = f"rig{os.getpid() % 10000}{made % 100:02d}"
        self._subnet = f"10.{64 + made % 128}.{os.getpid() % 250}"
        self._bridge = f"{self._name}br"
        self._made: list[str] = []

    @staticmethod
    def missing() -> str | None:
        """Why no namespaces can be made here, or None."""
        if shutil.which("ip") is None:
            return "no `ip` command (iproute2)"
        if os.geteuid() != 0:
            return "network namespaces need root"
        probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
        return None if probe.returncode == 0 else f"ip netns: {probe.stderr.strip()}"

    @property
    def here(self) -> str:
        """This (the root) namespace's address on the bridge: the test reaches every host."""
        return f"{self._subnet}.254"

    def address(self, name: str) -> str:
        return f"{self._subnet}.{self.names.index(name) + 1}"

    def namespace(self, name: str) -> str:
        return f"{self._name}-{name}"

    def prefix(self, name: str) -> list[str]:
        """What runs a command inside host NAME."""
        return ["ip", "netns", "exec", self.namespace(name)]

    def popen(self, name: str, cmd: Sequence[str], log: Path, cwd: Path, **kwargs: Any
              ) -> subprocess.Popen[bytes]:
        """CMD inside host NAME, its output in LOG, in a process group of its own."""
        return subprocess.Popen([*self.prefix(name), *cmd], cwd=cwd,
                                stdout=log.open("wb"), stderr=subprocess.STDOUT,
                                start_new_session=True, **kwargs)

    def cut(self, name: str) -> None:
        """Take host NAME's link down, as a pulled cable would."""
        _ip("-n", self.namespace(name), "link", "set", self._veth(name), "down")

    def __enter__(self) -> Hosts:
        try:
            _ip("link", "add", self._bridge, "type", "bridge")
            self._made.append(f"link:{self._bridge}")
            _ip("addr", "add", f"{self.here}/24", "dev", self._bridge)
            _ip("link", "set", self._bridge, "up")
            for name in self.names:
                self._add(name)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        for made in reversed(self._made):
            kind, what = made.split(":", 1)
            args = ["netns", "del", what] if kind == "netns" else ["link", "del", what]
            subprocess.run(["ip", *args], capture_output=True)
        self._made.clear()

    def _add(self, name: str) -> None:
        ns, veth = self.namespace(name), self._veth(name)
        _ip("netns", "add", ns)
        self._made.append(f"netns:{ns}")
        _ip("link", "add", veth, "type", "veth", "peer", "name", f"{veth}b")
        _ip("link", "set", veth, "netns", ns)
        self._made.append(f"link:{veth}b")  # its peer goes with it
        _ip("link", "set", f"{veth}b", "master", self._bridge)
        _ip("link", "set", f"{veth}b", "up")
        _ip("-n", ns, "addr", "add", f"{self.address(name)}/24", "dev", veth)
        _ip("-n", ns, "link", "set", veth, "up")
        _ip("-n", ns, "link", "set", "lo", "up")

    def _veth(self, name: str) -> str:
        return f"{self._name}{self.names.index(name)}"  # 15 characters at most, peer's "b" too


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise OSError(f"ip {' '.join(args)}: {done.stderr.strip()}")
