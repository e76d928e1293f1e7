"""The discrete-event loop: virtual time, the agenda, and the order of things within an instant.

At each instant ``t``: every agenda entry due at ``t`` is applied first (scenario events in file
order, then pod completions and timers in the order they were scheduled), and if ``t`` is on the
schedule grid (multiples of ``schedulePeriod``) one round follows: the fleet step (placement of
plain jobs, failover, global admission, splits, cross-cluster gang), then one Volcano session
per reachable cluster in name order, whose binds, evictions and podgroup phases the job
controller reacts to at once, then the HyperJob status pass. A round whose input did not change
gives the same (empty) decisions, because the cores are pure, so the loop jumps over such rounds
to the next agenda entry; with no ``until`` the run ends when the agenda is empty and a round
changed nothing (or, if the state never settles, ``HORIZON`` after the last scenario event), and
``time`` is the last instant at which something changed.
"""

from __future__ import annotations

import math
from typing import Any

import schedcore

from . import output
from .agenda import SCENARIO, Agenda
from .cluster import ClusterDriver
from .controller import JobDriver
from .errors import ScenarioError
from .events import EventHandler, Wake
from .fleet import FleetDriver
from .kubelet import Kubelet
from .scenario import Scenario, load
from .world import World

# Without `until`, a run whose state keeps changing (a pod that restarts for ever) still ends:
# this much virtual time after the last scenario event.
HORIZON = 24 * 3600.0


class Engine:
    """One run of one scenario; ``run()`` returns the result object."""

    def __init__(self, scenario: Scenario, conf: Any) -> None:
        self.scenario = scenario
        self.world = World(scenario)
        self.agenda = Agenda()
        self.changed = False  # set by anything that changes the world since the last round
        self.kubelet = Kubelet(self)
        self.jobs = JobDriver(self)
        self.clusters = ClusterDriver(self, conf)
        self.fleet = FleetDriver(self)
        self.handler = EventHandler(self)
        for event in scenario.events:
            self.agenda.push(event.at, event, rank=SCENARIO)

    def run(self) -> dict[str, Any]:
        until = self.scenario.until
        period = self.scenario.period
        last_event = self.scenario.events[-1].at if self.scenario.events else 0.0
        limit = until if until is not None else last_event + HORIZON
        next_round, idle, last_change = 0.0, False, 0.0
        while True:
            due = self.agenda.next_time()
            if idle:
                if due is None:
                    break
                next_round = max(next_round, _grid(due, period))
            # Virtual time never goes back, even for an entry a core scheduled in the past.
            now = max(self.world.now, next_round if due is None else min(due, next_round))
            if now > limit + 1e-9:
                break
            self.world.now = now
            self.changed = False
            self._apply_due(now)
            if abs(now - next_round) < 1e-9:
                self._round()
                idle = not self.changed
                next_round = _round_time(next_round + period)
            else:
                idle = idle and not self.changed
            if self.changed:
                last_change = now
        end = until if until is not None else last_change
        self.world.now = end
        return self.result(end)

    def _apply_due(self, now: float) -> None:
        while (item := self.agenda.pop_one(now)) is not None:
            if not isinstance(item, Wake):
                self.changed = True
            self.handler.apply(item)

    def wake_after(self, t: float) -> None:
        """Make sure a round runs at the first schedule instant strictly after ``t``."""
        self.agenda.push(_grid(t + 1e-6, self.scenario.period), Wake())

    def _round(self) -> None:
        self.fleet.step()
        for name in sorted(self.world.clusters):
            if self.world.clusters[name].up:
                self.clusters.cycle(name)
        self.fleet.status()

    def result(self, end: float) -> dict[str, Any]:
        w = self.world
        return output.result(
            w.name, end,
            pods=[self._pod(p) for p in w.pods.values()],
            pod_groups=self.clusters.podgroups_output(),
            jobs=[{"name": j.name, "hyperJob": j.hyperjob, "cluster": j.cluster,
                   "phase": self.jobs.phase(j), "retryCount": self.jobs.retry_count(j)} for j in w.jobs.values()],
            hyperjobs=self.fleet.output(),
            queues=self.clusters.queues_output(),
            events=w.timeline,
        )

    @staticmethod
    def _pod(p: Any) -> dict[str, Any]:
        return {"name": p.name, "job": p.job, "task": p.task, "index": p.index, "cluster": p.cluster,
                "node": None if p.reserved else p.node, "phase": p.phase, "startedAt": output.seconds(p.started_at),
                "finishedAt": output.seconds(p.finished_at), "restarts": p.restarts}


def prepare(text: str) -> Engine:
    """Validate a scenario text (``ScenarioError`` naming the place) and build its engine."""
    scenario = load(text)
    try:
        conf = schedcore.parse_conf(scenario.scheduler_conf) if scenario.scheduler_conf else schedcore.DEFAULT_CONF
    except schedcore.ConfError as exc:
        raise ScenarioError("spec.schedulerConf", str(exc)) from None
    return Engine(scenario, conf)


def _grid(t: float, period: float) -> float:
    """The first schedule instant at or after ``t``."""
    return _round_time(math.ceil(t / period - 1e-9) * period)


def _round_time(t: float) -> float:
    # Keep grid instants exact (0.1 * 3 is not 0.3) so event times print the same on every run.
    return round(t, 9)
