"""Placing, retrying and removing child jobs."""

from __future__ import annotations

import time

from msgspec.structs import replace

import api
import events
import fleetcore
import records
from events import subjects
from servicekit import Cause, Reaction, Runtime, emit
from store import Write

PRODUCER = "global-scheduler"


class GlobalScheduler:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    async def on_place(self, msg: events.PlaceChild) -> Reaction:
        existing = await self.rt.store.get(records.PLACEMENT, msg.child)
        if existing is not None and existing.decode(records.PlacementDoc).state == "Dispatched":
            return Reaction()  # already placed: a repeated request changes nothing
        placement = records.PlacementDoc(child=msg.child, hyperjob=msg.hyperjob, replicated_job=msg.replicated_job,
                                         job=msg.job, env=msg.env, env_by_pod=msg.env_by_pod,
                                         rank_offset=msg.rank_offset, world_size=msg.world_size,
                                         clusters=msg.clusters, requested_at=time.time())
        return self._try(msg, placement, await self._capacities(), existing.version if existing else 0)

    def _try(self, cause: events.Message | Cause, placement: records.PlacementDoc,
             capacities: dict[str, fleetcore.ClusterCapacity], version: int) -> Reaction:
        job = api.decode(placement.job)
        assert isinstance(job, api.Job)
        # A child the splitter planned onto one cluster waits for that cluster's room; a plain job
        # goes to the best live cluster, whose own Volcano queueing takes it from there.
        planned = len(placement.clusters) == 1 and bool(placement.hyperjob)
        chosen = fleetcore.place_job(job.spec, capacities, time.time(), cluster_names=placement.clusters,
                                     wait_for_fit=planned)
        reaction = Reaction()
        if isinstance(chosen, fleetcore.Waiting):
            reaction.writes.append(Write.put(records.PLACEMENT, placement.child,
                                             replace(placement, state="Waiting", reason=chosen.reason), version))
            if chosen.reason != placement.reason:
                reaction.publish(subjects.CHILD_WAITING, emit(
                    events.ChildPlacementWaiting, cause, "waiting", PRODUCER, child=placement.child,
                    hyperjob=placement.hyperjob, reason=chosen.reason))
            return reaction
        reaction.writes.append(Write.put(records.PLACEMENT, placement.child,
                                         replace(placement, state="Dispatched", cluster=chosen, reason=""), version))
        return reaction.publish(subjects.dispatch(chosen), emit(
            events.DispatchChild, cause, f"dispatch/{chosen}", PRODUCER, child=placement.child, cluster=chosen,
            hyperjob=placement.hyperjob, replicated_job=placement.replicated_job, job=placement.job,
            env=placement.env, env_by_pod=placement.env_by_pod, rank_offset=placement.rank_offset,
            world_size=placement.world_size))

    async def retry_waiting(self) -> None:
        capacities = await self._capacities()
        for name, stored in (await self.rt.store.list(records.PLACEMENT)).items():
            placement = stored.decode(records.PlacementDoc)
            if placement.state != "Waiting":
                continue
            cause = Cause(event_id=events.derive_id(name, f"retry/{stored.version}"))
            reaction = self._try(cause, placement, capacities, stored.version)
            if any(isinstance(m, events.DispatchChild) for _, m in reaction.outputs):
                await self.rt.commit("global-scheduler-retry", cause.event_id, reaction)

    async def on_unplace(self, msg: events.RemoveChild) -> Reaction:
        stored = await self.rt.store.get(records.PLACEMENT, msg.child)
        if stored is None:
            return Reaction()
        placement = stored.decode(records.PlacementDoc)
        if placement.state in ("Removing", "Removed"):
            return Reaction()
        if placement.state == "Waiting":
            # Never dispatched: nothing to remove anywhere.
            reaction = Reaction(writes=[Write.delete(records.PLACEMENT, msg.child, stored.version)])
            return reaction.publish(f"job.removed.{placement.cluster or '-'}", emit(
                events.JobRemoved, msg, "removed", PRODUCER, cluster=placement.cluster, job=msg.child,
                hyperjob=placement.hyperjob))
        reaction = Reaction(writes=[Write.put(records.PLACEMENT, msg.child, replace(placement, state="Removing"),
                                              stored.version)])
        return reaction.publish(subjects.remove_child(placement.cluster), emit(
            events.RemoveChild, msg, "remove", PRODUCER, child=msg.child, cluster=placement.cluster))

    async def on_removed(self, msg: events.JobRemoved) -> Reaction:
        stored = await self.rt.store.get(records.PLACEMENT, msg.job)
        if stored is None or stored.decode(records.PlacementDoc).cluster != msg.cluster:
            return Reaction()
        return Reaction(writes=[Write.delete(records.PLACEMENT, msg.job, stored.version)])

    async def _capacities(self) -> dict[str, fleetcore.ClusterCapacity]:
        return {name: records.cluster_capacity(doc.decode(records.ClusterDoc))
                for name, doc in (await self.rt.store.list(records.CLUSTER)).items()}
