"""Shared queue accounting for proportion and capacity (Volcano's queueAttr)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..resources import ResourceSpace
from ..state import ALLOCATED, JobState

if TYPE_CHECKING:
    from ..session import Session


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
        return np.where(job.min_req > 0, np.maximum(job.min_req - job.allocated, 0.0), 0.0)
    return None


def elastic_part(job: JobState) -> np.ndarray:
    """Allocated beyond minResources, per dimension."""
    base = job.min_req if job.min_req is not None else np.zeros_like(job.allocated)
    return np.maximum(job.allocated - base, 0.0)


def add_job(attr: QueueAttr, job: JobState) -> None:
    attr.allocated += job.allocated
    attr.request += job.allocated
    for t in job.tasks:
        if t.status == "Pending":
            attr.request += t.req
    part = inqueue_part(job)
    if part is not None:
        attr.inqueue += part
    attr.elastic += elastic_part(job)


def share_of(ssn: Session, allocated: np.ndarray, deserved: np.ndarray) -> float:
    """max over the cluster's dimensions of allocated/deserved (0/0 = 0, x/0 = 1)."""
    dims = ssn.share_dims
    d, a = deserved[dims], allocated[dims]
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(d > 0, a / np.where(d > 0, d, 1.0), (a != 0).astype(float))
    return float(s.max()) if len(s) else 0.0


def real_capability(ssn: Session, guarantee: np.ndarray, total_guarantee: np.ndarray,
                    capability: np.ndarray, parent_real: np.ndarray | None = None) -> np.ndarray:
    base = ssn.total if parent_real is None else parent_real
    return np.minimum(np.maximum(base - total_guarantee, 0.0) + guarantee, capability)
