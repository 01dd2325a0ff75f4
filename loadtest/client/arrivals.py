"""Open-loop load: each request of the fixed workload gets a scheduled send time.

    locust -f loadtest/engines.py --headless --users 64 --rate 4 --arrival poisson --requests 200

Closed-loop users send, wait for the answer, send again: when the engine slows down, so does
the load. Production traffic does not wait. With --rate R the workload's N requests are sent on
a schedule fixed before the run: request i at offset t_i from the moment dispatch opens, where

- constant: t_i = i / R;
- poisson: t_0 = 0 and the gaps t_i - t_(i-1) are drawn from an exponential distribution of
  mean 1/R by Python's Mersenne Twister seeded with --arrival-seed (default 0), so the same
  options give the same schedule on every process and in every run;
- gamma (--burstiness B): the gaps are drawn from Gamma(shape=B, scale=1/(R*B)), seeded the
  same way: their mean stays 1/R and their coefficient of variation is 1/sqrt(B), so B < 1
  sends in bursts with lulls between (the same mean rate), B = 1 is Poisson and B > 1 is
  smoother than Poisson, tending to constant.

Conversations (Workload.sessions): the schedule gives each session's start, its first turn;
its later turns follow their previous answer and think time (loadtest/client/conversation.py).

--users is then the cap on requests in flight: a free user takes the next request in schedule
order and sleeps until its time; a request whose time comes while every user is busy waits
for one, and that wait (`cap_wait_ns`) is kept in its record beside its scheduled time
(`scheduled_ns`, on the same clock as `sent_ns`). Latency is measured from the scheduled time
as well as from the actual send (loadtest/results/record.py), so a client that falls behind
cannot hide the queueing it caused (coordinated omission).

Across processes the master hands out request ids as before (loadtest/client/dispatch.py) with
the schedule's origin as a wall-clock time; each process turns it into its own monotonic clock
(exact on one host; across hosts as good as their clocks' agreement, NTP: typically < 1 ms).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from functools import partial
from typing import Any

from loadtest.toolkit.types import BadValue, seed

__all__ = ["ARRIVALS", "OpenLoop", "add_arrival_options", "arrival_kind", "burstiness",
           "open_loop_from_options", "send_offsets_ns"]

ARRIVALS = ("constant", "poisson", "gamma")


def arrival_kind(text: object) -> str:
    """--arrival's one check (the locustfile's, and a command's parser's through CHECKS)."""
    if str(text) not in ARRIVALS:
        raise BadValue(f"must be one of {', '.join(ARRIVALS)}, got {str(text)!r}")
    return str(text)


def burstiness(text: object) -> float:
    """--burstiness's one check: gamma's shape, a finite number above 0."""
    try:
        value = float(str(text))
    except ValueError:
        raise BadValue(f"must be a number above 0, got {str(text)!r}") from None
    if not 0 < value < float("inf"):
        raise BadValue(f"must be a number above 0, got {str(text)!r}")
    return value


@dataclass(frozen=True)
class OpenLoop:
    rate: float  # requests (or sessions) per second, offered
    arrival: str  # constant | poisson | gamma
    seed: int
    burstiness: float = 1.0  # gamma's shape; 1 for the others (Poisson's own)

    def offsets_ns(self, requests: int) -> list[int]:
        return send_offsets_ns(requests, self.rate, self.arrival, self.seed, self.burstiness)

    def digest(self, requests: int) -> str:
        """Names the schedule, so every process can check it built the same one."""
        shape = [self.burstiness] if self.arrival == "gamma" else []  # older digests unchanged
        text = json.dumps([self.rate, self.arrival, self.seed, requests, *shape])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def columns(self, requests: int) -> dict[str, Any]:
        """The run's open-loop settings, for run.json and runs.csv."""
        offsets = self.offsets_ns(requests)
        columns: dict[str, Any] = {"rate": self.rate, "arrival": self.arrival,
                                   "arrival_seed": self.seed}
        if self.arrival == "gamma":
            columns["burstiness"] = self.burstiness
        columns["schedule_s"] = offsets[-1] / 1e9 if offsets else 0.0
        return columns


def send_offsets_ns(requests: int, rate: float, arrival: str, seed: int = 0,
                    burstiness: float = 1.0) -> list[int]:
    """Each request's send time, in ns from the schedule's origin; the first at 0."""
    if arrival not in ARRIVALS:
        raise ValueError(f"unknown arrival {arrival!r}")
    if arrival == "constant":
        return [round(i * 1e9 / rate) for i in range(requests)]
    rng = random.Random(seed)
    gap = (partial(rng.expovariate, rate) if arrival == "poisson"
           else partial(rng.gammavariate, burstiness, 1 / (rate * burstiness)))
    offsets, t = [], 0.0
    for i in range(requests):
        if i:
            t += gap()
        offsets.append(round(t * 1e9))
    return offsets


def add_arrival_options(parser: Any) -> None:
    group = parser.add_argument_group("llm-load-rig: open loop")
    group.add_argument("--rate", type=str, default="",
                       help="open loop: send requests at this rate (requests/s; conversations: "
                            "sessions started/s) on a schedule, whatever the answers do; --users "
                            "caps the requests (sessions) in flight (default: closed loop, each "
                            "user sends when its last answer ended)")
    group.add_argument("--arrival", default="poisson",
                       help="with --rate: constant (evenly spaced), poisson (exponential gaps, "
                            "seeded; default) or gamma (gamma gaps of shape --burstiness, seeded)")
    group.add_argument("--burstiness", type=str, default="",
                       help="with --arrival gamma: the gaps' shape B > 0, the mean rate kept at "
                            "--rate: B < 1 bursts and lulls, 1 Poisson, > 1 smoother (default 1)")
    group.add_argument("--arrival-seed", type=str, default="0",
                       help="with --rate poisson or gamma: the schedule's seed (default 0: the "
                            "same schedule every run)")


def open_loop_from_options(options: Any) -> OpenLoop | None:
    """The options' schedule, None in closed loop; ValueError (one line) for a bad value."""
    rate_given = str(getattr(options, "rate", "") or "")  # "" (the default): closed loop
    rate_text = rate_given.strip()  # " 2 " is 2; " " was given and is no number
    arrival = getattr(options, "arrival", "poisson")
    seed_text = str(getattr(options, "arrival_seed", "0"))
    burstiness_text = str(getattr(options, "burstiness", "") or "")  # as given: " " is no number
    if not rate_given:
        if arrival != "poisson" or seed_text != "0" or burstiness_text:
            raise ValueError("--arrival, --arrival-seed and --burstiness shape an open-loop "
                             "schedule: give --rate too")
        return None
    try:
        rate = float(rate_text)
    except ValueError:
        raise ValueError(f"--rate must be a number of requests per second, got {rate_given!r}") from None
    if not rate > 0 or rate == float("inf"):
        raise ValueError(f"--rate must be above 0 requests per second, got {rate_text!r}")
    try:
        arrival = arrival_kind(arrival)
    except BadValue as exc:
        raise ValueError(f"--arrival {exc}") from None
    try:
        schedule_seed = seed(seed_text)
    except BadValue as exc:
        raise ValueError(f"--arrival-seed {exc}") from None
    return OpenLoop(rate, arrival, schedule_seed, _burstiness(burstiness_text, arrival, rate))


def _burstiness(text: str, arrival: str, rate: float) -> float:
    """--burstiness as gamma's shape: a finite number above 0 (and, with --rate, one whose
    gaps' scale 1/(R*B) is a number), only for --arrival gamma."""
    if not text:
        return 1.0
    if arrival != "gamma":
        raise ValueError(f"--burstiness shapes --arrival gamma, not {arrival}")
    try:
        value = burstiness(text)
    except BadValue as exc:
        raise ValueError(f"--burstiness {exc}") from None
    if not 0 < rate * value < float("inf"):
        raise ValueError(f"--burstiness {text} with --rate {rate:g} leaves no gap to draw")
    return value
