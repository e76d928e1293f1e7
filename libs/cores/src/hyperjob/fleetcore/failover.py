"""Failover, the child-failure policy, and HyperJob commands (suspend, resume, abort, restart).

All three are pure functions returning the plan in force and a list of decisions for the driver:
``ChildMove`` (delete the child where it was, create it unchanged on ``to_cluster``; same name),
``ChildUnplaced`` (withdraw it; it waits Pending without a cluster, retried by ``failover``),
``ChildWaits`` (a child on a lost cluster that no other cluster can hold now stays where it is,
with the reason: it resumes there if its cluster comes back, or moves once room appears),
``ChildCommand`` (a Volcano Job command to one child), ``SetLifecycle`` (feed it to
``aggregate_status``).

A child leaves a silent cluster only once that cluster's fleet lease has surely lapsed (silent for
``CLUSTER_SILENCE_TIMEOUT`` = lease + margin, ``liveness``), and never while the cluster's nodes
still report (``nodes_heard``): that is a hung control plane, not a lost cluster, and nothing there
could stop the child's pods, so the child waits (``ChildWaits``, ``HUNG``) and runs on where it is.

A child only moves to a cluster whose free capacity holds its whole gang, and the capacity a move
takes is taken from the ``working`` view the caller passes: several HyperJobs failing over in one
round never count the same free GPUs twice.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Literal

import msgspec

from hyperjob import api

from .capacity import PodShape, gang_pods
from .model import ChildPlan, ClusterCapacity, SplitPlan, cluster_lost, control_plane_hung, live_clusters
from .placement import place_job
from .split import choose_cluster, eligible_clusters
from .status import TERMINAL_CHILD_PHASES, Lifecycle

JobCommand = Literal["AbortJob", "ResumeJob", "RestartJob", "TerminateJob"]
HyperJobAction = Literal["suspend", "resume", "abort", "restart"]


class ChildMove(msgspec.Struct, frozen=True, kw_only=True):
    child: str
    from_cluster: str
    to_cluster: str
    reason: str


class ChildUnplaced(msgspec.Struct, frozen=True, kw_only=True):
    child: str
    from_cluster: str
    reason: str


class ChildWaits(msgspec.Struct, frozen=True, kw_only=True):
    child: str
    cluster: str
    reason: str


class ChildCommand(msgspec.Struct, frozen=True, kw_only=True):
    child: str
    action: JobCommand
    reason: str = ""


class SetLifecycle(msgspec.Struct, frozen=True, kw_only=True):
    lifecycle: Lifecycle
    reason: str = ""


FleetDecision = ChildMove | ChildUnplaced | ChildWaits | ChildCommand | SetLifecycle

HUNG = "control plane silent while its nodes report: hung, not lost; the child runs on there, never in two places"


def hung_reason(cluster: str) -> str:
    """Why a child on a hung cluster stays (a HyperJob's waiting reason shows it)."""
    return f"cluster {cluster}: {HUNG}"


def failover(
    hyperjob: api.HyperJob,
    plan: SplitPlan,
    clusters: Mapping[str, ClusterCapacity],
    now: float,
    *,
    finished: Collection[str] = (),
    working: dict[str, ClusterCapacity] | None = None,
    may_move: Callable[[], bool] = lambda: True,
    nodes_heard: Mapping[str, float] | None = None,
) -> tuple[SplitPlan, list[FleetDecision]]:
    """Re-place every unfinished child whose cluster is lost (no report with a Ready node for 30 s,
    or unknown) or that has no cluster (``""``), keeping its name, on a live eligible cluster where
    its whole gang fits. A child on a lost cluster that no cluster can hold now stays there
    (``ChildWaits``, with the reason); one without a cluster stays unplaced.

    Call on every capacity summary / timer tick; with nothing lost it returns the plan unchanged
    and no decision (idempotent). ``finished`` names children already terminal (never moved).
    ``working`` is the live fleet's capacity as this round has used it so far (the moves made
    here take theirs from it); ``may_move()`` is asked before each move (a rate limit): when it
    says no, the child waits for a later round. ``nodes_heard``: when each cluster's nodes last
    reported alive; a child on a silent cluster whose nodes report never moves (``HUNG``).
    """
    if working is None:
        working = live_clusters(clusters, now)
    decisions: list[FleetDecision] = []
    for child in plan.children:
        home = clusters.get(child.cluster)
        if child.name in finished or (home is not None and not cluster_lost(home, now)):
            continue
        if home is not None and control_plane_hung(home, (nodes_heard or {}).get(child.cluster), now):
            decisions.append(ChildWaits(child=child.name, cluster=child.cluster, reason=hung_reason(child.cluster)))
            continue
        reason = f"cluster {child.cluster} lost" if child.cluster else "no cluster yet"
        trial = dict(working)
        moved, decision = _replace(hyperjob, plan, child.name, trial, exclude=(), reason=reason)
        if isinstance(decision, ChildUnplaced):
            if child.cluster:
                decisions.append(ChildWaits(child=child.name, cluster=child.cluster, reason=decision.reason))
            continue  # nothing can hold it now: it keeps its place (or its lack of one)
        if not may_move():
            decisions.append(
                ChildWaits(child=child.name, cluster=child.cluster, reason=f"{reason}; failovers rate-limited")
            )
            continue
        working.update(trial)
        plan = moved
        decisions.append(decision)
    return plan, decisions


def plain_failover(
    job: api.Job,
    name: str,
    cluster: str,
    clusters: Mapping[str, ClusterCapacity],
    now: float,
    *,
    finished: bool = False,
    nodes_heard: Mapping[str, float] | None = None,
) -> list[FleetDecision]:
    """A plain Job (not part of a HyperJob) on a lost cluster runs again elsewhere, keeping its
    name, when its whole gang fits another live cluster now; otherwise it stays where it is and
    runs again when its cluster comes back. On a hung cluster (its nodes report) it stays."""
    home = clusters.get(cluster)
    if finished or not cluster or (home is not None and not cluster_lost(home, now)):
        return []
    if home is not None and control_plane_hung(home, (nodes_heard or {}).get(cluster), now):
        return [ChildWaits(child=name, cluster=cluster, reason=hung_reason(cluster))]
    others = {n: c for n, c in live_clusters(clusters, now).items() if n != cluster}
    target = place_job(job.spec, others, now, wait_for_fit=True)
    if not isinstance(target, str):
        return []
    return [ChildMove(child=name, from_cluster=cluster, to_cluster=target, reason=f"cluster {cluster} lost")]


def child_failed(
    hyperjob: api.HyperJob,
    plan: SplitPlan,
    child: str,
    clusters: Mapping[str, ClusterCapacity],
    now: float,
    phases: Mapping[str, str],
) -> tuple[SplitPlan, list[FleetDecision]]:
    """A child failed beyond its own retries; apply the HyperJob's ``childFailurePolicy``.

    FailHyperJob (default): abort every other non-terminal child (the HyperJob fails; its
    condition follows once all are terminal). RestartHyperJob: restart every child. RePlaceChild:
    recreate the child on another eligible cluster where it fits (else on its own, else unplaced).
    ``phases`` maps each child to its Volcano Job phase.
    """
    policy = hyperjob.spec.child_failure_policy
    reason = f"child {child} failed ({policy})"
    current = plan.child(child)
    if current is None:
        return plan, []  # not a child of the plan in force: stale
    if policy == "RePlaceChild":
        working = live_clusters(clusters, now)
        new_plan, decision = _replace(hyperjob, plan, child, working, exclude=(current.cluster,), reason=reason)
        return new_plan, [decision]
    if policy == "RestartHyperJob":
        return plan, [
            SetLifecycle(lifecycle="Restarting", reason=reason),
            *(ChildCommand(child=c.name, action="RestartJob", reason=reason) for c in plan.children),
        ]
    others = [
        c.name
        for c in plan.children
        if c.name != child and phases.get(c.name, "Pending") not in TERMINAL_CHILD_PHASES | {"Aborting"}
    ]
    return plan, [ChildCommand(child=name, action="AbortJob", reason=reason) for name in others]


def child_pods(hyperjob: api.HyperJob, child: ChildPlan) -> list[PodShape]:
    """The pods of one child's gang (what a move promises its new cluster)."""
    rj = next(r for r in hyperjob.spec.replicated_jobs if r.name == child.replicated_job)
    return gang_pods(rj.template_spec, child.tasks)


def _replace(
    hyperjob: api.HyperJob,
    plan: SplitPlan,
    name: str,
    working: dict[str, ClusterCapacity],
    exclude: Sequence[str],
    reason: str,
) -> tuple[SplitPlan, FleetDecision]:
    """Choose a new cluster for one child: other clusters first, then the excluded ones."""
    child = plan.child(name)
    assert child is not None, name
    rj = next(r for r in hyperjob.spec.replicated_jobs if r.name == child.replicated_job)
    pods = child_pods(hyperjob, child)
    eligible = eligible_clusters(hyperjob, rj, working)
    used = sorted({c.cluster for c in plan.children if c.name != name and c.cluster in working})
    limit = hyperjob.spec.max_domains
    target = choose_cluster(pods, [n for n in eligible if n not in exclude], working, used, limit)
    if target is None:
        target = choose_cluster(pods, [n for n in eligible if n in exclude], working, used, limit)
    if target is None:
        moved = msgspec.structs.replace(child, cluster="")
        decision: FleetDecision = ChildUnplaced(
            child=name, from_cluster=child.cluster, reason=f"{reason}; no eligible cluster can hold it now"
        )
    else:
        moved = msgspec.structs.replace(child, cluster=target)
        decision = ChildMove(child=name, from_cluster=child.cluster, to_cluster=target, reason=reason)
    children = tuple(moved if c.name == name else c for c in plan.children)
    return msgspec.structs.replace(plan, children=children), decision


def hyperjob_command(
    action: HyperJobAction, phases: Mapping[str, str], lifecycle: Lifecycle = "Active"
) -> tuple[Lifecycle, list[FleetDecision]]:
    """A user command on the whole HyperJob; ``phases`` maps each child to its Job phase.

    suspend: abort every running child and go Suspended (the driver also ``release_gang``s);
    resume: resume aborted children and go Active; abort: abort every child for good (the
    HyperJob ends Failed once all are terminal); restart: restart every child and go Restarting
    (``settle_lifecycle`` returns to Active; pass ``previous=None`` to ``aggregate_status``).
    """
    live = [c for c, p in phases.items() if p not in TERMINAL_CHILD_PHASES | {"Aborting"}]
    if action in ("suspend", "abort"):
        new: Lifecycle = "Suspended" if action == "suspend" else lifecycle
        return new, [
            SetLifecycle(lifecycle=new, reason=action),
            *(ChildCommand(child=c, action="AbortJob", reason=action) for c in live),
        ]
    if action == "resume":
        stopped = [c for c, p in phases.items() if p in ("Aborted", "Aborting")]
        new = "Resuming" if stopped else "Active"
        return new, [
            SetLifecycle(lifecycle=new, reason=action),
            *(ChildCommand(child=c, action="ResumeJob", reason=action) for c in stopped),
        ]
    return "Restarting", [
        SetLifecycle(lifecycle="Restarting", reason=action),
        *(ChildCommand(child=c, action="RestartJob", reason=action) for c in phases),
    ]


def settle_lifecycle(lifecycle: Lifecycle, phases: Mapping[str, str]) -> Lifecycle:
    """Restarting ends (Active) once no child is still Restarting, Aborting or Terminating;
    Resuming once no child is still Aborted either (each has come back)."""
    busy = {"Restarting", "Aborting", "Terminating"}
    if lifecycle == "Restarting" and not any(p in busy for p in phases.values()):
        return "Active"
    if lifecycle == "Resuming" and not any(p in busy | {"Aborted"} for p in phases.values()):
        return "Active"
    return lifecycle
