"""Pure parts of the global-scheduler: the fleet's capacity as the clusters report it, and the
choices a round makes with it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from hyperjob import api, events, fleetcore, records
from hyperjob.records.capacity import Capacity
from hyperjob.servicekit import Reaction

__all__ = [
    "Capacity",
    "InFlight",
    "choose",
    "fleet_queue",
    "in_flight",
    "preempt_orders",
    "preemption",
    "reserve_room",
    "room_elsewhere",
    "round_cause",
]


def fleet_queue(msg: events.QueueChanged) -> fleetcore.FleetQueue:
    queue = api.expect_kind(api.decode_stored(msg.manifest), api.Queue)
    return msgspec.structs.replace(fleetcore.fleet_queue(queue, msg.created), state=msg.state)


def choose(
    placement: records.PlacementDoc, working: dict[str, fleetcore.ClusterCapacity], now: float
) -> str | fleetcore.Waiting:
    """Where a waiting child goes now, and take its room from ``working`` so the next choice of
    the same round sees it taken. A planned child waits for its cluster's room; a plain job goes
    to the best live cluster, whose own Volcano queueing takes it from there."""
    job = api.decode_stored(placement.job)
    if isinstance(job, api.PodGroup):
        live = [c for c in (placement.clusters or sorted(working)) if c in working]
        return live[0] if live else fleetcore.Waiting(reason="no live cluster")
    job = api.expect_kind(job, api.Job)
    planned = not placement.plain and len(placement.clusters) == 1
    chosen = fleetcore.place_job(job.spec, working, now, cluster_names=placement.clusters, wait_for_fit=planned)
    if isinstance(chosen, str):
        taken = fleetcore.place_gang(
            working[chosen], fleetcore.gang_pods(job.spec, {t.name: t.replicas for t in job.spec.tasks})
        )
        if not isinstance(taken, str):
            working[chosen] = taken
    return chosen


def room_elsewhere(placement: records.PlacementDoc, working: dict[str, fleetcore.ClusterCapacity], now: float) -> str:
    """Another live cluster where the whole gang of a planned child that waits for room on its own
    could start now ("" if none): the child should be planned again rather than wait there."""
    job = api.decode_stored(placement.job)
    if not isinstance(job, api.Job):
        return ""
    chosen = fleetcore.place_job(job.spec, working, now, wait_for_fit=True)
    return chosen if isinstance(chosen, str) and chosen not in placement.clusters else ""


def reserve_room(children: list[records.PlacementDoc], working: dict[str, fleetcore.ClusterCapacity]) -> str | None:
    """Take the room of every child of a gang from ``working`` (each on its planned cluster), or
    say which one does not fit (and take nothing)."""
    trial = dict(working)
    for child in children:
        cluster = child.clusters[0] if child.clusters else ""
        job = api.expect_kind(api.decode_stored(child.job), api.Job)
        if cluster not in trial:
            return f"{child.child}: cluster {cluster or '?'} is not live"
        taken = fleetcore.place_gang(
            trial[cluster], fleetcore.gang_pods(job.spec, {t.name: t.replicas for t in job.spec.tasks})
        )
        if isinstance(taken, str):
            return f"{child.child}: {taken}"
        trial[cluster] = taken
    working.update(trial)
    return None


# Volcano's opt-out of being a victim (a task template's annotation or label).
PREEMPTABLE = "volcano.sh/preemptable"


def preemption(
    owner: records.OwnerDoc,
    children: list[records.PlacementDoc],
    placements: Iterable[records.PlacementDoc],
    owners: Mapping[str, records.OwnerDoc],
    queues: Mapping[str, fleetcore.FleetQueue],
    working: dict[str, fleetcore.ClusterCapacity],
    now: float,
) -> fleetcore.PreemptionPlan | str:
    """Coordinated preemption for a gang that free room cannot hold (``fleetcore.plan_preemption``):
    its children on their planned clusters, against every other child running on the fleet, each
    measured from when it was sent to its cluster (the fleet does not know when its pods started)."""
    gang = fleetcore.Preemptor(
        name=owner.name,
        queue=owner.queue,
        priority=owner.priority,
        children={p.child: _pods_of(p) for p in children},
        clusters={p.child: list(p.clusters) for p in children if p.clusters},
        reclaimable={name: q.reclaimable for name, q in queues.items()},
    )
    running = [
        _running(p, owners[p.owner].priority)
        for p in placements
        if p.owner != owner.name and p.state == "Dispatched" and p.running and not p.finished and p.owner in owners
    ]
    return fleetcore.plan_preemption(gang, working, [r for r in running if r is not None], now)


def _pods_of(placement: records.PlacementDoc) -> list[fleetcore.PodShape]:
    job = api.expect_kind(api.decode_stored(placement.job), api.Job)
    return fleetcore.gang_pods(job.spec, {t.name: t.replicas for t in job.spec.tasks})


def _running(placement: records.PlacementDoc, priority: int) -> fleetcore.RunningJob | None:
    """A running child as a victim candidate: its pods by name (``<job>-<task>-<index>``)."""
    job = api.decode_stored(placement.job)
    if not isinstance(job, api.Job):
        return None
    pods = []
    for task in job.spec.tasks:
        meta = task.template.metadata
        preemptable = (meta.annotations.get(PREEMPTABLE) or meta.labels.get(PREEMPTABLE, "true")) != "false"
        request = fleetcore.task_shape(task).request
        pods += [
            fleetcore.RunningPod(
                name=f"{placement.child}-{task.name}-{i}", node="", request=request, preemptable=preemptable
            )
            for i in range(task.replicas)
        ]
    return fleetcore.RunningJob(
        name=placement.child,
        cluster=placement.cluster,
        queue=job.spec.queue or api.DEFAULT_QUEUE,
        priority=priority,
        min_available=job.spec.min_available or len(pods),
        running_since=placement.dispatched_at,
        pods=tuple(pods),
    )


def preempt_orders(plan: fleetcore.PreemptionPlan) -> list[tuple[str, str, list[events.PreemptVictims]]]:
    """``(cluster, child placed there, victims)`` for each cluster of the plan that gives pods back."""
    by_cluster: dict[str, list[events.PreemptVictims]] = {}
    for e in plan.evictions:
        by_cluster.setdefault(e.cluster, []).append(events.PreemptVictims(job=e.job, pods=list(e.pods)))
    child_on = {cluster: child for child, cluster in sorted(plan.placements.items(), reverse=True)}
    return [(cluster, child_on[cluster], victims) for cluster, victims in sorted(by_cluster.items())]


class InFlight:
    """Children dispatched but not yet in their cluster's summary (which counts pods once bound):
    their room is taken from the next rounds' view, so a burst does not land on one cluster. What
    is in flight comes from the placement documents (it survives a restart); this keeps only
    each child's pods, decoded once."""

    def __init__(self) -> None:
        self.pods: dict[tuple[str, float], list[fleetcore.PodShape]] = {}

    def taken(
        self, live: dict[str, fleetcore.ClusterCapacity], placements: Iterable[records.PlacementDoc], since: float
    ) -> dict[str, fleetcore.ClusterCapacity]:
        """``live`` less the room of the children dispatched after ``since`` that do not run yet."""
        for p in placements:
            if not in_flight(p, since) or p.cluster not in live:
                continue
            taken = fleetcore.place_gang(live[p.cluster], self._pods(p))
            if not isinstance(taken, str):  # else its summary counts it already
                live[p.cluster] = taken
        return live

    def _pods(self, placement: records.PlacementDoc) -> list[fleetcore.PodShape]:
        key = (placement.child, placement.requested_at)
        pods = self.pods.get(key)
        if pods is None:
            job = api.decode_stored(placement.job)
            spec = job.spec if isinstance(job, api.Job) else None
            pods = fleetcore.gang_pods(spec, {t.name: t.replicas for t in spec.tasks}) if spec else []
            self.pods[key] = pods
        return pods

    def forget(self, live_children: set[str]) -> None:
        self.pods = {k: v for k, v in self.pods.items() if k[0] in live_children}


def in_flight(placement: records.PlacementDoc, since: float) -> bool:
    """Sent to its cluster after ``since``, and neither running nor finished there yet."""
    return not_running_yet(placement) and placement.dispatched_at >= since


def not_running_yet(placement: records.PlacementDoc) -> bool:
    """Sent to its cluster, and neither running nor finished there yet."""
    return placement.state == "Dispatched" and not placement.running and not placement.finished


def round_cause(instance: str, now: float, reaction: Reaction) -> str:
    """A round's id (``events.round_id``), from when it ran and what it decided."""
    return events.round_id(instance, "round", now, (message.event_id for _, message in reaction.outputs))
