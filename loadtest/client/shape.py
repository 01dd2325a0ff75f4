"""Staged load through Locust's own LoadTestShape: each stage's users and spawn rate in turn.

Locust asks tick() about once a second and starts or stops users to match. After the last stage
the shape holds its users: the dispatcher hands out no more work from then on
(loadtest/client/dispatch.py), and once the requests in flight are done and the run is saved,
tick() returns None and Locust quits (returning None at the stages' end would cut them). A user a stage stops finishes its request
first (loadtest/engines.py waits for it, Locust's stop_timeout).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from locust import LoadTestShape

from loadtest.client.stages import Stage, stage_bounds

__all__ = ["StagesShape"]


class StagesShape(LoadTestShape):
    def __init__(self, stages: Sequence[Stage], finished: Callable[[], bool], users: int) -> None:
        super().__init__()
        self.users = users  # open-loop stages: the cap on requests in flight, throughout
        self.stages = list(stages)
        self.bounds = stage_bounds(self.stages)
        self.finished = finished  # the run's last request is done and recorded

    def tick(self) -> tuple[int, float] | None:
        return None if self.finished() else self.tick_at(self.get_run_time())

    def tick_at(self, run_time_s: float) -> tuple[int, float]:
        """(users, spawn rate) at run_time_s: the stage it falls in, else the last one."""
        index = next((i for i, (_, end) in enumerate(self.bounds) if run_time_s < end),
                     len(self.stages) - 1)
        stage = self.stages[index]
        if stage.users is None:
            return self.users, float(self.users)
        previous = self.stages[index - 1].users if index else 0
        # no spawn rate: the whole change at once (Locust takes users per second)
        return stage.users, stage.spawn_rate or float(max(abs(stage.users - (previous or 0)), 1))
