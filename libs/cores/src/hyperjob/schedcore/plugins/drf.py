"""drf: dominant-resource-fairness job order and preemption guard.

Hierarchical DRF (queue annotations) is not implemented: the conf refuses ``enableHierarchy`` on
drf by name (``conf._plugin``), so drf never provides QueueOrder or Reclaimable here.
"""

from __future__ import annotations

import numpy as np

from ..framework import EventHandler, JobOrder, JobOrderKey, NoArgs, Plugin, Preemptable, SessionView
from ..state import JobState, TaskState

_DELTA = 1e-6


class DrfPlugin(Plugin[NoArgs], JobOrder, Preemptable, JobOrderKey, EventHandler):
    NAME = "drf"

    def on_session_open(self, ssn: SessionView) -> None:
        super().on_session_open(ssn)
        self.total = ssn.total
        # Share is taken over the cluster's resources; a resource the cluster lacks counts 0.
        self.inv = np.where(ssn.total > 0, 1.0 / np.where(ssn.total > 0, ssn.total, 1.0), 0.0)
        self.allocated = {id(j): j.allocated.copy() for j in ssn.jobs.values()}
        self.shares = {k: self._share(v) for k, v in self.allocated.items()}

    def _share(self, alloc: np.ndarray) -> float:
        return float((alloc * self.inv).max()) if len(alloc) else 0.0

    def job_order(self, a: JobState, b: JobState) -> int:
        sa, sb = self.shares[id(a)], self.shares[id(b)]
        return 0 if sa == sb else (-1 if sa < sb else 1)

    def job_order_key(self, job: JobState) -> float:
        """Sort key agreeing with ``job_order``."""
        return self.shares[id(job)]

    def preemptable(self, preemptor: TaskState, candidates: list[TaskState]) -> list[TaskState] | None:
        pj = preemptor.job
        ls = self._share(self.allocated[id(pj)] + preemptor.req)
        left: dict[int, np.ndarray] = {}
        victims = []
        for c in candidates:
            key = id(c.job)
            alloc = left.setdefault(key, self.allocated[key].copy())
            alloc -= c.req
            if ls < self._share(alloc) or abs(ls - self._share(alloc)) <= _DELTA:
                victims.append(c)
        return victims

    def _update(self, task: TaskState, sign: float) -> None:
        key = id(task.job)
        self.allocated[key] += sign * task.req
        self.shares[key] = self._share(self.allocated[key])

    def on_allocate(self, task: TaskState) -> None:
        self._update(task, 1.0)

    def on_deallocate(self, task: TaskState) -> None:
        self._update(task, -1.0)
