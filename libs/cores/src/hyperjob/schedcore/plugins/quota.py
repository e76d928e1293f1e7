"""Shared queue accounting for proportion and capacity (Volcano's queueAttr)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..framework import SessionView
from ..resources import ResourceSpace
from ..state import ALLOCATED, JobState, QueueState, TaskState
from ..status import SUCCESS, Status, unschedulable


class QueueAttr:
    """Per-queue quota state of one session."""

    def __init__(self, name: str, space: ResourceSpace) -> None:
        z = np.zeros(space.size)
        self.name = name
        self.allocated = z.copy()
        self.request = z.copy()
        self.inqueue = z.copy()
        self.elastic = z.copy()
        self.deserved = z.copy()
        self.guarantee = z.copy()
        self.capability = np.full(space.size, np.inf)
        self.real_cap = np.full(space.size, np.inf)
        self.share = 0.0
        self.weight = 1.0


def task_quota(
    space: ResourceSpace,
    queue: str,
    task: TaskState,
    after: np.ndarray,
    limit: np.ndarray,
    limit_name: str,
    plugin: str,
) -> Status:
    """Allocatable's answer for ``task`` of ``queue``: ``SUCCESS`` when ``after`` (its queue's
    allocation with the task) stays within ``limit`` on the task's dimensions; else which
    resources the quota runs out of."""
    dims = space.req_dims(task.req)
    if space.le_on(after, limit, dims):
        return SUCCESS
    over = ", ".join(space.over_on(after, limit, dims))
    return unschedulable(
        f"queue {queue} quota does not admit {task.name}: its {limit_name} is reached on {over}", plugin
    )


def admission(space: ResourceSpace, attr: QueueAttr, min_req: np.ndarray, plugin: str) -> Status:
    """JobEnqueueable's check of one queue: ``minResources + allocated + inqueue - elastic`` within
    its real capability on the dimensions minResources names; a rejection names those it exceeds."""
    dims = space.req_dims(min_req)
    need = min_req + attr.allocated + attr.inqueue - attr.elastic
    if space.le_on(need, attr.real_cap, dims):
        return SUCCESS
    over = ", ".join(space.over_on(need, attr.real_cap, dims))
    return unschedulable(
        f"queue {attr.name}: podgroup minResources exceed what the queue can admit on {over} "
        "(its capability, or the cluster less other queues' guarantees, beside podgroups already admitted)",
        plugin,
    )


def queue_closed(queue: QueueState, plugin: str) -> Status:
    return unschedulable(f"queue {queue.name} is {queue.info.state}", plugin)


def capability_vec(space: ResourceSpace, cap: dict[str, float]) -> np.ndarray:
    """Capability with Volcano's reading: absent, or cpu/memory <= 0, means unlimited."""
    v = np.full(space.size, np.inf)
    for name, amount in cap.items():
        i = space.index.get(name)
        if i is None:
            continue
        if name in ("cpu", "memory") and amount <= 0:
            continue
        v[i] = amount
    return v


def inqueue_part(job: JobState) -> np.ndarray | None:
    """What an admitted job still reserves: max(0, minResources - allocated) on minResources dims."""
    if job.min_req is None:
        return None
    if job.phase == "Inqueue" or (job.phase == "Running" and job.n(*ALLOCATED) >= job.min_member):
        part = np.where(job.min_req > 0, np.maximum(job.min_req - job.allocated, 0.0), 0.0)
        return np.maximum(part - job.gated_req, 0.0)
    return None


def queue_sums(ssn: SessionView, jobs: list[JobState]) -> dict[str, tuple[np.ndarray, ...]]:
    """Per queue: (allocated, request = allocated + pending, inqueue, elastic) of its jobs.

    ``inqueue``: what admitted jobs still reserve (``inqueue_part``); ``elastic``: allocation
    beyond minResources (all of it for a job without minResources). Computed on job x resource
    matrices, so a session with thousands of running jobs pays a few vector operations instead of
    thousands.
    """
    size = ssn.space.size
    if not jobs:
        return {}
    names = sorted({j.queue for j in jobs})
    qi = {n: i for i, n in enumerate(names)}
    idx = np.array([qi[j.queue] for j in jobs])
    alloc = np.array([j.allocated for j in jobs]).reshape(len(jobs), size)
    has_min = np.array([j.min_req is not None for j in jobs])
    mins = np.array([j.min_req if j.min_req is not None else np.zeros(size) for j in jobs]).reshape(len(jobs), size)
    admitted = (
        np.array([j.phase == "Inqueue" or (j.phase == "Running" and j.n(*ALLOCATED) >= j.min_member) for j in jobs])
        & has_min
    )
    gated = np.array([j.gated_req for j in jobs]).reshape(len(jobs), size)
    inqueue = np.where(admitted[:, None] & (mins > 0), np.maximum(mins - alloc - gated, 0.0), 0.0)
    elastic = np.maximum(alloc - mins, 0.0)
    pending = np.zeros_like(alloc)
    for k, j in enumerate(jobs):
        if j.counts.get("Pending"):
            for t in j.tasks:
                if t.status == "Pending":
                    pending[k] += t.req
    out: dict[str, tuple[np.ndarray, ...]] = {}
    for name, i in qi.items():
        sel = idx == i
        a = alloc[sel].sum(axis=0)
        out[name] = (a, a + pending[sel].sum(axis=0), inqueue[sel].sum(axis=0), elastic[sel].sum(axis=0))
    return out


def assign(attr: QueueAttr, sums: tuple[np.ndarray, ...]) -> None:
    attr.allocated += sums[0]
    attr.request += sums[1]
    attr.inqueue += sums[2]
    attr.elastic += sums[3]


def share_of(ssn: SessionView, allocated: np.ndarray, deserved: np.ndarray) -> float:
    """max over the cluster's dimensions of allocated/deserved (0/0 = 0, x/0 = 1)."""
    dims = ssn.share_dims
    d, a = deserved[dims], allocated[dims]
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(d > 0, a / np.where(d > 0, d, 1.0), (a != 0).astype(float))
    return float(s.max()) if len(s) else 0.0


def real_capability(
    ssn: SessionView,
    guarantee: np.ndarray,
    total_guarantee: np.ndarray,
    capability: np.ndarray,
    parent_real: np.ndarray | None = None,
) -> np.ndarray:
    base = ssn.total if parent_real is None else parent_real
    real: np.ndarray = np.minimum(np.maximum(base - total_guarantee, 0.0) + guarantee, capability)
    return real


def reclaim_victims(
    attrs: dict[str, QueueAttr],
    candidates: list[TaskState],
    above_keep: Callable[[QueueAttr, np.ndarray, TaskState], bool],
) -> list[TaskState]:
    """The queue side of reclaim for proportion and capacity (Volcano's reclaimableFn walk).

    Candidates are taken in order; ``above_keep(attr, allocated, candidate)`` says whether the
    candidate's queue, with ``allocated`` as it stands after the victims already chosen, still
    holds more than it may keep. A victim's request comes off that running figure, so a queue
    gives up pods only until it is back within what it may keep. Queues without attributes
    keep everything.
    """
    left: dict[str, np.ndarray] = {}
    victims = []
    for c in candidates:
        assert c.job is not None
        attr = attrs.get(c.job.queue)
        if attr is None:
            continue
        allocated = left.setdefault(attr.name, attr.allocated.copy())
        if above_keep(attr, allocated, c):
            allocated -= c.req
            victims.append(c)
    return victims
