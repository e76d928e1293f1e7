"""Network-topology-aware placement over ``topology.hyperjob.io/tierN`` node labels.

A job's ``networkTopology`` asks for its gang inside one HyperNode (a label value of one tier):
``hard`` tries tiers 1..highestTierAllowed and otherwise leaves the job pending; ``soft`` tries
the same and then falls back to any nodes. Without a request, a job of more than one task
behaves as soft over every tier, so gangs land in as few tier1 domains as possible.
Within a tier, domains are tried tightest first (least free capacity that still holds the
gang's aggregate request), then by name; each try is a statement rolled back on failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..cyclestate import StateKey
from ..nodes import TIER_LABEL
from ..state import JobState, QueueState, TaskState
from ..status import unschedulable
from .util import PriorityQueue

if TYPE_CHECKING:
    from ..session import Session
    from ..statement import Statement


def wants_topology(ssn: Session, job: JobState) -> bool:
    if job.info.network_topology is not None:
        return True
    return job.min_member > 1 and _max_tier(ssn) > 0


# This module's per-cycle data: the deepest tier, and per tier its domains and node -> domain.
MAX_TIER: StateKey[int] = StateKey("topology.max_tier")
DOMAINS: StateKey[dict[int, list[tuple[str, np.ndarray]]]] = StateKey("topology.domains")
DOMAIN_INDEX: StateKey[dict[int, np.ndarray]] = StateKey("topology.domain_index")


def _max_tier(ssn: Session) -> int:
    return ssn.cycle_state.get(MAX_TIER, ssn.nodes.tiers)


def domains(ssn: Session, tier: int) -> list[tuple[str, np.ndarray]]:
    """The HyperNodes of one tier as (name, node mask), by name; built once per session."""
    cache = ssn.cycle_state.get(DOMAINS, dict)
    if tier not in cache:
        rows: dict[str, list[int]] = {}
        for i, v in enumerate(ssn.nodes.column(f"{TIER_LABEL}{tier}")):
            if v is not None:
                rows.setdefault(v, []).append(i)
        out = []
        for name in sorted(rows):
            mask = np.zeros(ssn.nodes.size, dtype=bool)
            mask[rows[name]] = True
            out.append((name, mask))
        cache[tier] = out
    return cache[tier]


def allocate_in_topology(
    ssn: Session, stmt: Statement, job: JobState, queue: QueueState, tasks: PriorityQueue[TaskState]
) -> None:
    from .allocate import allocate_tasks

    todo: list[TaskState] = []
    while not tasks.empty():
        todo.append(tasks.pop())
    nt = job.info.network_topology
    hard = nt is not None and nt.mode == "hard"
    top = _max_tier(ssn)
    highest = min(nt.highest_tier_allowed or top, top) if nt is not None else top
    placed = [t.node for t in job.tasks if t.node >= 0 and t.status in ("Running", "Bound", "Releasing")]
    need = _needed(job, todo)
    for tier in range(1, highest + 1):
        for name, mask in _ordered(ssn, tier, need, placed):
            mark = stmt.mark()
            job.failed_roles.clear()  # a misfit in one domain says nothing about the next
            allocate_tasks(
                ssn,
                stmt,
                job,
                queue,
                PriorityQueue(ssn.task_before, [t for t in todo if t.status == "Pending"]),
                None,
                mask,
                ("topology", tier, name),
            )
            if ssn.job_ready(job) or ssn.job_pipelined(job):
                return
            stmt.rollback_to(mark)
    if hard:
        job.fit_errors["topology"] = unschedulable(f"no HyperNode of tier <= {highest} holds the gang")
        return
    job.failed_roles.clear()
    allocate_tasks(ssn, stmt, job, queue, PriorityQueue(ssn.task_before, todo), None)


def _needed(job: JobState, todo: list[TaskState]) -> np.ndarray:
    k = max(job.min_member - job.ready_num() - job.waiting_num(), 1)
    return sum((t.req for t in todo[:k]), np.zeros_like(job.allocated))


def _ordered(ssn: Session, tier: int, need: np.ndarray, placed: list[int]) -> list[tuple[str, np.ndarray]]:
    doms = domains(ssn, tier)
    if not doms:
        return []
    index = _domain_index(ssn, tier, doms)
    valid = index >= 0
    free = np.zeros((len(doms), ssn.space.size))
    np.add.at(free, index[valid], ssn.nodes.fidle[valid])  # every domain's FutureIdle in one pass
    ok = np.all(free + ssn.space.eps >= need, axis=1)
    if placed:
        # Pods already running pin the job to the one domain holding all of them (if any).
        same = index[placed]
        only = int(same[0]) if bool(np.all(same == same[0])) else -1
        ok &= np.arange(len(doms)) == only
    order = sorted(np.flatnonzero(ok).tolist(), key=lambda d: (free[d, 0], free[d, 1], doms[d][0]))
    return [doms[d] for d in order]


def _domain_index(ssn: Session, tier: int, doms: list[tuple[str, np.ndarray]]) -> np.ndarray:
    cache = ssn.cycle_state.get(DOMAIN_INDEX, dict)
    if tier not in cache:
        index = np.full(ssn.nodes.size, -1)
        for d, (_, mask) in enumerate(doms):
            index[mask] = d
        cache[tier] = index
    return cache[tier]
