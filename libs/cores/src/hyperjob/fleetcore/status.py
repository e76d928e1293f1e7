"""Folding every child's state into the one HyperJob status (upstream's shape plus ours)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from hyperjob import api
from hyperjob.events import PodCounts

HyperJobPhase = Literal[
    "Pending", "Admitted", "Running", "Suspended", "Restarting", "Completed", "Failed", "Aborted", "Terminating"
]
Lifecycle = Literal["Active", "Suspended", "Resuming", "Restarting", "Terminating"]
"""What the HyperJob's owner (splitter / global-scheduler) is doing with it; fed by commands.
``Resuming``: resumed, its children not all out of Aborted yet (their stopped state is not an end)."""

TERMINAL_CHILD_PHASES = frozenset({"Completed", "Failed", "Aborted", "Terminated"})
# A child counts toward the HyperJob's minAvailable once it runs (or already ran to completion).
RUNNING_CHILD_PHASES = frozenset({"Running", "Completing", "Completed"})
COMPLETED_REASON = "AllChildVCJobsCompleted"
FAILED_REASON = "SomeChildVCJobsUnsuccessful"
ABORTED_REASON = "ChildVCJobsAborted"  # the unsuccessful ones were all aborted (``abort``), none failed


def finished_phase(phases: Sequence[str]) -> Literal["Completed", "Failed", "Aborted"]:
    """The phase of a HyperJob whose children all ended in ``phases``: Completed when they all
    completed, Aborted when the others were aborted (as its children are), else Failed."""
    if all(p == "Completed" for p in phases):
        return "Completed"
    return "Aborted" if all(p in ("Completed", "Aborted") for p in phases) else "Failed"


class ChildStatus(PodCounts, frozen=True):
    """What the status-aggregator knows of one child: its Volcano Job phase and pod counters.

    A planned child not created yet is ``phase="Pending"`` with zero counters; ``cluster`` is ""
    while the child has no cluster. Not keyword-only, so that these fields come before the
    (keyword-only) counters, in the order a stored child status has always had.
    """

    name: str
    replicated_job: str
    cluster: str = ""
    phase: str = "Pending"
    reason: str = ""
    message: str = ""
    last_transition_time: float = 0.0
    replicas: int = 0


class _Out(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Status structs encode in upstream's camelCase shape."""


class JobState(_Out, frozen=True, kw_only=True):
    phase: str
    reason: str = ""
    message: str = ""
    last_transition_time: float = 0.0


class Condition(_Out, frozen=True, kw_only=True):
    type: Literal["Completed", "Failed"]
    status: Literal["True", "False"] = "True"
    reason: str = ""
    message: str = ""
    last_transition_time: float = 0.0


class ReplicatedJobStatus(_Out, PodCounts, frozen=True):
    """One replicated job: its children's states and their pods' counters summed. Not
    keyword-only, so ``name`` and ``jobStates`` encode before the counters, as upstream's do."""

    name: str
    job_states: dict[str, JobState] = {}


class HyperJobStatus(_Out, frozen=True, kw_only=True):
    """``msgspec.json.encode`` gives upstream's status plus ``phase``, ``placement``, ``waitingReason``."""

    conditions: tuple[Condition, ...] = ()
    replicated_jobs_status: tuple[ReplicatedJobStatus, ...] = ()
    split_count: int = 0
    observed_generation: int = 0
    phase: HyperJobPhase = "Pending"
    placement: dict[str, int] = {}
    waiting_reason: str = ""


def aggregate_status(
    hyperjob: api.HyperJob,
    children: Sequence[ChildStatus],
    *,
    previous: HyperJobStatus | None = None,
    admitted: bool = True,
    lifecycle: Lifecycle = "Active",
    waiting_reason: str = "",
    now: float = 0.0,
) -> HyperJobStatus:
    """The HyperJob status from every current child (pure; the same inputs give the same status).

    ``children`` are all children of the plan in force (not-yet-created ones as Pending).
    Conditions appear only when every child is terminal (Completed, Failed, Aborted, Terminated)
    while the HyperJob is Active, and are sticky: once ``previous`` has one, it and the phase it
    implies stay (pass ``previous=None`` after a restart to start over). ``admitted`` is False
    while the global queue has not admitted the HyperJob. ``waiting_reason`` is kept only while
    Pending or Admitted; without one, a waiting child's message (``children_waiting_reason``) is.
    """
    conditions = previous.conditions if previous and previous.conditions else _conditions(children, lifecycle, now)
    phase = _phase(hyperjob, children, conditions, admitted, lifecycle)
    return HyperJobStatus(
        conditions=conditions,
        replicated_jobs_status=tuple(_replicated(rj.name, children) for rj in hyperjob.spec.replicated_jobs),
        split_count=len(children),
        observed_generation=hyperjob.metadata.generation,
        phase=phase,
        placement=placement(children),
        waiting_reason=(waiting_reason or children_waiting_reason(children))
        if phase in ("Pending", "Admitted")
        else "",
    )


def children_waiting_reason(children: Sequence[ChildStatus]) -> str:
    """Why the HyperJob waits on its clusters: the first waiting child's ``message`` (its
    podgroup's Unschedulable condition), naming the child and its cluster."""
    waiting = sorted(
        (c for c in children if c.message and c.phase not in RUNNING_CHILD_PHASES | TERMINAL_CHILD_PHASES),
        key=lambda c: c.name,
    )
    if not waiting:
        return ""
    first = waiting[0]
    more = f" (and {len(waiting) - 1} more children waiting)" if len(waiting) > 1 else ""
    return f"child {first.name} on cluster {first.cluster}: {first.message}{more}"


def _conditions(children: Sequence[ChildStatus], lifecycle: Lifecycle, now: float) -> tuple[Condition, ...]:
    if lifecycle != "Active" or not children or any(c.phase not in TERMINAL_CHILD_PHASES for c in children):
        return ()
    if all(c.phase == "Completed" for c in children):
        return (
            Condition(
                type="Completed",
                reason=COMPLETED_REASON,
                last_transition_time=now,
                message=f"all {len(children)} child jobs completed",
            ),
        )
    bad = sorted(c.name for c in children if c.phase != "Completed")
    aborted = finished_phase([c.phase for c in children]) == "Aborted"
    return (
        Condition(
            type="Failed",
            reason=ABORTED_REASON if aborted else FAILED_REASON,
            last_transition_time=now,
            message=f"unsuccessful child jobs: {', '.join(bad)}",
        ),
    )


def _phase(
    hyperjob: api.HyperJob,
    children: Sequence[ChildStatus],
    conditions: Sequence[Condition],
    admitted: bool,
    lifecycle: Lifecycle,
) -> HyperJobPhase:
    if lifecycle == "Terminating":
        return "Terminating"
    if conditions:
        if conditions[0].type == "Completed":
            return "Completed"
        return "Aborted" if conditions[0].reason == ABORTED_REASON else "Failed"
    if lifecycle == "Suspended" or lifecycle == "Restarting":
        return lifecycle
    if hyperjob.spec.child_failure_policy == "FailHyperJob" and any(c.phase == "Failed" for c in children):
        return "Failed"  # the others are being aborted; the condition follows once all are terminal
    if not admitted:
        return "Pending"
    wanted = hyperjob.spec.min_available if hyperjob.spec.min_available is not None else len(children)
    running = sum(1 for c in children if c.phase in RUNNING_CHILD_PHASES)
    return "Running" if children and running >= max(min(wanted, len(children)), 1) else "Admitted"


def _replicated(name: str, children: Sequence[ChildStatus]) -> ReplicatedJobStatus:
    mine = [c for c in children if c.replicated_job == name]
    return ReplicatedJobStatus(
        name=name,
        job_states={
            c.name: JobState(
                phase=c.phase, reason=c.reason, message=c.message, last_transition_time=c.last_transition_time
            )
            for c in sorted(mine, key=lambda c: c.name)
        },
        **msgspec.structs.asdict(PodCounts.summed(mine)),
    )


def placement(children: Sequence[ChildStatus]) -> dict[str, int]:
    """cluster → replicas of the children placed there, sorted by cluster; unplaced ones skipped."""
    result: dict[str, int] = {}
    for child in sorted(children, key=lambda c: c.cluster):
        if child.cluster:
            result[child.cluster] = result.get(child.cluster, 0) + child.replicas
    return result
