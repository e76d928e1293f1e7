"""proportion: weighted water-filling of the cluster into per-queue ``deserved`` (spec 1a)."""

from __future__ import annotations

import numpy as np

from ..framework import (
    Allocatable,
    EventHandler,
    JobEnqueueable,
    NoArgs,
    Overused,
    Plugin,
    Preemptive,
    QueueOrder,
    Reclaimable,
    SessionView,
)
from ..state import JobState, QueueState, TaskState
from ..status import SUCCESS, Status, unschedulable
from .quota import (
    QueueAttr,
    admission,
    assign,
    capability_vec,
    queue_closed,
    queue_sums,
    real_capability,
    reclaim_victims,
    share_of,
    task_quota,
)


class ProportionPlugin(
    Plugin[NoArgs], QueueOrder, Reclaimable, Preemptive, Overused, Allocatable, JobEnqueueable, EventHandler
):
    NAME = "proportion"

    def on_session_open(self, ssn: SessionView) -> None:
        super().on_session_open(ssn)
        space = ssn.space
        self.attrs: dict[str, QueueAttr] = {}
        total_guarantee = np.zeros(space.size)
        for q in ssn.queues.values():
            total_guarantee += space.vec(q.info.guarantee)
        jobs = [j for j in ssn.jobs.values() if j.queue in ssn.queues]
        for name, sums in queue_sums(ssn, jobs).items():
            q = ssn.queues[name]
            attr = self.attrs[name] = QueueAttr(name, space)
            attr.weight = float(q.info.weight)
            attr.guarantee = space.vec(q.info.guarantee)
            attr.capability = capability_vec(space, q.info.capability)
            attr.real_cap = real_capability(ssn, attr.guarantee, total_guarantee, attr.capability)
            assign(attr, sums)
        self._water_fill()
        for attr in self.attrs.values():
            attr.share = share_of(ssn, attr.allocated, attr.deserved)
            ssn.deserved[attr.name] = attr.deserved

    def _water_fill(self) -> None:
        space = self.ssn.space
        remaining = self.ssn.total.copy()
        meet: set[str] = set()
        while True:
            open_attrs = [a for name, a in sorted(self.attrs.items()) if name not in meet]
            total_weight = sum(a.weight for a in open_attrs)
            if total_weight == 0:
                break
            before = remaining.copy()
            inc = np.zeros(space.size)
            dec = np.zeros(space.size)
            for a in open_attrs:
                old = a.deserved.copy()
                d = np.minimum(a.deserved + remaining * a.weight / total_weight, a.real_cap)
                d = np.maximum(np.minimum(d, a.request), a.guarantee)
                a.deserved = d
                if space.less_equal(a.request, d) or bool(np.all(np.abs(d - old) < space.eps)):
                    meet.add(a.name)
                inc += np.maximum(d - old, 0.0)
                dec += np.maximum(old - d, 0.0)
            remaining = np.maximum(remaining - inc + dec, 0.0)
            if space.is_empty(remaining) or bool(np.all(np.abs(remaining - before) < space.eps)):
                break

    def _attr(self, queue: QueueState) -> QueueAttr | None:
        return self.attrs.get(queue.name)

    def queue_order(self, a: QueueState, b: QueueState) -> int:
        if a.info.priority != b.info.priority:
            return -1 if a.info.priority > b.info.priority else 1
        sa = self.attrs[a.name].share if a.name in self.attrs else 0.0
        sb = self.attrs[b.name].share if b.name in self.attrs else 0.0
        return 0 if sa == sb else (-1 if sa < sb else 1)

    def overused(self, queue: QueueState) -> bool:
        attr = self._attr(queue)
        return attr is not None and self.ssn.space.less_equal(attr.deserved, attr.allocated)

    def allocatable(self, queue: QueueState, task: TaskState) -> Status:
        """``preemptive`` for one task, with the reason a rejection gives."""
        attr = self._attr(queue)
        if not queue.is_open:
            return queue_closed(queue, self.NAME)
        if attr is None:
            return unschedulable(f"queue {queue.name} has no share this session", self.NAME)
        return task_quota(
            self.ssn.space, queue.name, task, attr.allocated + task.req, attr.deserved, "deserved share", self.NAME
        )

    def preemptive(self, queue: QueueState, tasks: list[TaskState]) -> bool:
        attr = self._attr(queue)
        if not queue.is_open or attr is None:
            return False
        space = self.ssn.space
        req = sum((t.req for t in tasks), np.zeros(space.size))
        return space.le_on(attr.allocated + req, attr.deserved, space.req_dims(req))

    def reclaimable(self, reclaimer: TaskState, candidates: list[TaskState]) -> list[TaskState] | None:
        space = self.ssn.space

        def above_deserved(attr: QueueAttr, allocated: np.ndarray, _: TaskState) -> bool:
            return not space.less_equal(allocated, attr.deserved)

        return reclaim_victims(self.attrs, candidates, above_deserved)

    def job_enqueueable(self, job: JobState) -> Status:
        q = self.ssn.queues[job.queue]
        if not q.is_open:
            return queue_closed(q, self.NAME)
        attr = self.attrs.get(job.queue)
        if job.min_req is None or attr is None:
            return SUCCESS
        return admission(self.ssn.space, attr, job.min_req, self.NAME)

    def job_enqueued(self, job: JobState) -> None:
        attr = self.attrs.get(job.queue)
        if attr is not None and job.min_req is not None:
            attr.inqueue += np.maximum(job.min_req - job.gated_req, 0.0)

    def _update(self, task: TaskState, sign: float) -> None:
        assert task.job is not None
        attr = self.attrs.get(task.job.queue)
        if attr is not None:
            attr.allocated += sign * task.req
            attr.share = share_of(self.ssn, attr.allocated, attr.deserved)

    def on_allocate(self, task: TaskState) -> None:
        self._update(task, 1.0)

    def on_deallocate(self, task: TaskState) -> None:
        self._update(task, -1.0)
