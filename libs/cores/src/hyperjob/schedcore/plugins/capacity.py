"""capacity: explicit per-queue ``deserved``, borrowing up to capability (spec 1b).

Flat mode builds attributes for queues with jobs; with ``enableHierarchy`` every queue gets one,
``parent`` "" means ``root``, ancestors accumulate their descendants, and quota checks walk the
whole path to root. A job in a non-leaf queue makes every hook reject for the session (Volcano's
quirk, kept). capacity registers no Overused.
"""

from __future__ import annotations

import msgspec
import numpy as np

from ..framework import (
    Allocatable,
    EventHandler,
    JobEnqueueable,
    Plugin,
    Preemptive,
    QueueOrder,
    Reclaimable,
    SessionView,
    VictimQueueOrder,
)
from ..state import JobState, QueueState, TaskState
from ..status import SUCCESS, Status, unschedulable
from .capacity_tree import QueueTree, build_flat, build_tree
from .quota import QueueAttr, admission, queue_closed, reclaim_victims, task_quota

ROOT = "root"


class CapacityArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    # How many ancestor levels may stand in for the reclaimer queue's "still below deserved".
    ancestor_reclaim_level: int = msgspec.field(default=0, name="ancestorReclaimLevel")


class CapacityPlugin(
    Plugin[CapacityArgs],
    QueueOrder,
    VictimQueueOrder,
    Reclaimable,
    Preemptive,
    Allocatable,
    JobEnqueueable,
    EventHandler,
):
    NAME = "capacity"
    Args = CapacityArgs

    def on_session_open(self, ssn: SessionView) -> None:
        super().on_session_open(ssn)
        pconf = ssn.plugin_conf.get(self.NAME)
        self.hierarchy = bool(pconf and pconf.switches.get("enableHierarchy", False))
        tree = QueueTree()
        (build_tree if self.hierarchy else build_flat)(tree, ssn)
        self.attrs, self.parent, self.defined, self.broken = tree.attrs, tree.parent, tree.defined, tree.broken
        for name, attr in self.attrs.items():
            attr.share = self._share(name)
            if name in ssn.queues:
                ssn.deserved[name] = attr.deserved

    # ---- helpers ------------------------------------------------------------------------
    def path(self, name: str) -> list[QueueAttr]:
        """The queue's attribute and every ancestor's, leaf first (flat: just the queue)."""
        out: list[QueueAttr] = []
        while name in self.attrs and self.attrs[name] not in out:
            out.append(self.attrs[name])
            if not self.hierarchy or name == ROOT:
                break
            name = self.parent.get(name, ROOT)
        return out

    def is_leaf(self, name: str) -> bool:
        return not self.hierarchy or not any(p == name for p in self.parent.values())

    def _share(self, name: str) -> float:
        attr, dims = self.attrs[name], self.defined.get(name)
        if dims is None or not dims.any():
            return 1.0  # best-effort queue: no deserved at all
        d, a = attr.deserved[dims], attr.allocated[dims]
        return float(max((x / y if y else (0.0 if x == 0 else 1.0)) for x, y in zip(a, d, strict=True)))

    def _usable(self, queue: QueueState) -> bool:
        return self._unusable(queue) is None

    def _unusable(self, queue: QueueState) -> Status | None:
        """Why every quota hook turns ``queue`` away this session, or None when it may be used."""
        if self.broken:
            return unschedulable("capacity: a job is in a non-leaf queue, so no queue admits anything", self.NAME)
        if not queue.is_open:
            return queue_closed(queue, self.NAME)
        if queue.name not in self.attrs:
            return unschedulable(f"queue {queue.name} has no capacity this session", self.NAME)
        if not self.is_leaf(queue.name):
            return unschedulable(f"queue {queue.name} is not a leaf queue", self.NAME)
        return None

    # ---- hooks --------------------------------------------------------------------------
    def queue_order(self, a: QueueState, b: QueueState) -> int:
        if a.info.priority != b.info.priority:
            return -1 if a.info.priority > b.info.priority else 1
        if self.hierarchy:
            la, lb = self.is_leaf(a.name), self.is_leaf(b.name)
            if la != lb:
                return -1 if la else 1
            a_name, b_name = self._below_common(a.name, b.name)
        else:
            a_name, b_name = a.name, b.name
        sa = self.attrs[a_name].share if a_name in self.attrs else 1.0
        sb = self.attrs[b_name].share if b_name in self.attrs else 1.0
        if sa != sb:
            return -1 if sa < sb else 1
        ea, eb = self._best_effort(a_name), self._best_effort(b_name)
        return 0 if ea == eb else (1 if ea else -1)

    def _best_effort(self, name: str) -> bool:
        dims = self.defined.get(name)
        return dims is None or not dims.any()

    def _ancestors(self, name: str) -> list[str]:
        out = [name]
        while name != ROOT and name in self.parent and self.parent[name] not in out:
            name = self.parent[name]
            out.append(name)
        return out

    def _below_common(self, a: str, b: str) -> tuple[str, str]:
        pa, pb = self._ancestors(a)[::-1], self._ancestors(b)[::-1]
        i = 0
        while i < min(len(pa), len(pb)) - 1 and pa[i + 1] == pb[i + 1]:
            i += 1
        return pa[min(i + 1, len(pa) - 1)], pb[min(i + 1, len(pb) - 1)]

    def victim_queue_order(self, a: QueueState, b: QueueState, preemptor: QueueState) -> int:
        if not self.hierarchy:
            return 0
        anc = self._ancestors(preemptor.name)
        depth = {n: len(anc) - i for i, n in enumerate(anc)}
        da = max((depth.get(n, 0) for n in self._ancestors(a.name)), default=0)
        db = max((depth.get(n, 0) for n in self._ancestors(b.name)), default=0)
        return 0 if da == db else (-1 if da > db else 1)

    def allocatable(self, queue: QueueState, task: TaskState) -> Status:
        """Within the capability of the queue and (hierarchy) of every ancestor."""
        unusable = self._unusable(queue)
        if unusable is not None:
            return unusable
        for a in self.path(queue.name):
            limit = "capability" if a.name == queue.name else f"ancestor {a.name}'s capability"
            status = task_quota(self.ssn.space, queue.name, task, a.allocated + task.req, a.real_cap, limit, self.NAME)
            if status.rejects:
                return status
        return SUCCESS

    def preemptive(self, queue: QueueState, tasks: list[TaskState]) -> bool:
        if not self._usable(queue):
            return False
        space = self.ssn.space
        req = sum((t.req for t in tasks), np.zeros(space.size))
        attr = self.attrs[queue.name]
        # The reclaimer's own capability only: its ancestors are full by definition when
        # there is something to reclaim.
        if not space.le_on(attr.allocated + req, attr.real_cap, space.req_dims(req)):
            return False
        levels = self.path(queue.name)[: 1 + max(self.args.ancestor_reclaim_level, 0)]
        return any(self._below_deserved(a, req) for a in levels)

    def _below_deserved(self, attr: QueueAttr, req: np.ndarray) -> bool:
        """Some requested dimension (pods and all-but-zero ones aside) stays within deserved."""
        space = self.ssn.space
        after = attr.allocated + req
        dims = space.req_dims(req) & ~((after < space.eps) & (attr.deserved < space.eps))
        return bool(np.any(after[dims] <= attr.deserved[dims] + 1e-9))

    def reclaimable(self, reclaimer: TaskState, candidates: list[TaskState]) -> list[TaskState] | None:
        if self.broken:
            return []
        space = self.ssn.space
        rdims = space.req_dims(reclaimer.req)

        def above_deserved(attr: QueueAttr, allocated: np.ndarray, c: TaskState) -> bool:
            """A victim frees something the reclaimer asks for and leaves its queue its guarantee;
            its queue declares no deserved on what it frees, or is above it on some of it."""
            cdims = space.req_dims(c.req)
            if not (cdims & rdims).any() or not bool(np.all(attr.guarantee <= allocated - c.req + 1e-9)):
                return False
            defined = self.defined.get(attr.name, np.zeros(space.size, dtype=bool)) & (attr.deserved >= space.eps)
            common = cdims & defined
            return not common.any() or bool(np.any(allocated[common] > attr.deserved[common] + 1e-9))

        return reclaim_victims(self.attrs, candidates, above_deserved)

    def job_enqueueable(self, job: JobState) -> Status:
        """Admitted by the queue and (hierarchy) by every ancestor."""
        unusable = self._unusable(self.ssn.queues[job.queue])
        if unusable is not None:
            return unusable
        if job.min_req is None:
            return SUCCESS
        for a in self.path(job.queue):
            status = admission(self.ssn.space, a, job.min_req, self.NAME)
            if status.rejects:
                return status
        return SUCCESS

    def job_enqueued(self, job: JobState) -> None:
        if job.min_req is not None:
            for a in self.path(job.queue):
                a.inqueue += np.maximum(job.min_req - job.gated_req, 0.0)

    def _update(self, task: TaskState, sign: float) -> None:
        assert task.job is not None
        for a in self.path(task.job.queue):
            a.allocated += sign * task.req
            a.share = self._share(a.name)

    def on_allocate(self, task: TaskState) -> None:
        self._update(task, 1.0)

    def on_deallocate(self, task: TaskState) -> None:
        self._update(task, -1.0)
