"""Admitting owners by their global queue, placing their children, retrying and removing them."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from msgspec.structs import replace

import api
import events
import fleetcore
import records
from events import subjects
from servicekit import Cause, Reaction, Runtime, emit
from store import Write

from . import domain

PRODUCER = "global-scheduler"
# After a gang attempt timed out, how long before the next attempt (seconds).
GANG_RETRY_DELAY = 5.0
TERMINAL_JOB_PHASES = ("Completed", "Failed", "Aborted", "Terminated")


class GlobalScheduler:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.wake = asyncio.Event()

    # -- consumed messages ----------------------------------------------------------------------

    async def on_place(self, msg: events.PlaceChild) -> Reaction:
        """Record the request; the admission round (woken now) admits and places it."""
        existing = await self.rt.store.get(records.PLACEMENT, msg.child)
        current = existing.decode(records.PlacementDoc) if existing is not None else None
        if current is not None and current.state not in ("Waiting", "Removing", "Replacing"):
            return Reaction()  # already placed: a repeated request changes nothing
        placement = records.PlacementDoc(child=msg.child, hyperjob=msg.hyperjob, replicated_job=msg.replicated_job,
                                         job=msg.job, env=msg.env, env_by_pod=msg.env_by_pod,
                                         rank_offset=msg.rank_offset, world_size=msg.world_size,
                                         clusters=msg.clusters, requested_at=time.time(),
                                         reason="waiting for its queue to admit it")
        version = existing.version if existing else 0
        if current is not None and current.state in ("Removing", "Replacing"):
            # A replacement (a changed template keeps the child's name): the previous child is
            # still being removed from its cluster. Keep the request, placed once that one is gone.
            replacing = replace(placement, state="Replacing", cluster=current.cluster,
                                reason="waiting for the previous child of this name to be removed")
            return Reaction(writes=[Write.put(records.PLACEMENT, msg.child, replacing, version)])
        return Reaction(writes=[Write.put(records.PLACEMENT, msg.child, placement, version)]).then(self.wake.set)

    async def on_job_phase(self, msg: events.JobPhaseChanged) -> Reaction:
        """A child that finished no longer holds its queue's share (nor does its owner, once all did)."""
        stored = await self.rt.store.get(records.PLACEMENT, msg.job)
        if stored is None:
            return Reaction()
        placement = stored.decode(records.PlacementDoc)
        finished = msg.new in TERMINAL_JOB_PHASES
        if placement.cluster != msg.cluster or placement.finished == finished:
            return Reaction()
        return Reaction(writes=[Write.put(records.PLACEMENT, msg.job, replace(placement, finished=finished),
                                          stored.version)]).then(self.wake.set)

    async def on_unplace(self, msg: events.RemoveChild) -> Reaction:
        stored = await self.rt.store.get(records.PLACEMENT, msg.child)
        if stored is None:
            return Reaction()
        placement = stored.decode(records.PlacementDoc)
        if placement.state in ("Removing", "Removed"):
            return Reaction()
        if placement.state == "Replacing":
            # The replacement is withdrawn; its predecessor is already being removed.
            return Reaction(writes=[Write.put(records.PLACEMENT, msg.child, replace(placement, state="Removing"),
                                              stored.version)])
        if placement.state in ("Waiting", "Unplaced"):
            # Not dispatched anywhere (any earlier cluster was already told to remove it).
            reaction = Reaction(writes=[Write.delete(records.PLACEMENT, msg.child, stored.version)]).then(self.wake.set)
            return reaction.publish(subjects.job_removed("unplaced"), emit(
                events.JobRemoved, msg, "removed", PRODUCER, cluster="", job=msg.child, hyperjob=placement.hyperjob))
        reaction = Reaction(writes=[Write.put(records.PLACEMENT, msg.child, replace(placement, state="Removing"),
                                              stored.version)])
        return reaction.publish(subjects.remove_child(placement.cluster), emit(
            events.RemoveChild, msg, "remove", PRODUCER, child=msg.child, cluster=placement.cluster))

    async def on_move(self, msg: events.MoveChild) -> Reaction:
        """Failover: the child leaves its cluster (removed there, now or when it returns) and runs,
        under the same name, on ``to_cluster``; with none it is Unplaced until the splitter finds one."""
        stored = await self.rt.store.get(records.PLACEMENT, msg.child)
        if stored is None:
            return Reaction()
        placement = stored.decode(records.PlacementDoc)
        if placement.state == "Dispatched" and placement.cluster == msg.to_cluster:
            return Reaction()  # already there: a repeated move changes nothing
        reaction = Reaction()
        if placement.state == "Dispatched" and placement.cluster:
            reaction.publish(subjects.remove_child(placement.cluster), emit(
                events.RemoveChild, msg, "remove-moved", PRODUCER, child=msg.child, cluster=placement.cluster))
        if not msg.to_cluster:
            moved = replace(placement, state="Unplaced", cluster="", reason=msg.reason, finished=False)
            reaction.writes.append(Write.put(records.PLACEMENT, msg.child, moved, stored.version))
            return reaction.publish(subjects.CHILD_WAITING, emit(
                events.ChildPlacementWaiting, msg, "waiting", PRODUCER, child=msg.child, hyperjob=placement.hyperjob,
                reason=msg.reason))
        moved = replace(placement, state="Dispatched", cluster=msg.to_cluster, clusters=[msg.to_cluster], reason="",
                        finished=False)
        reaction.writes.append(Write.put(records.PLACEMENT, msg.child, moved, stored.version))
        return reaction.publish(subjects.dispatch(msg.to_cluster), self._dispatch(msg, moved))

    async def on_removed(self, msg: events.JobRemoved) -> Reaction:
        stored = await self.rt.store.get(records.PLACEMENT, msg.job)
        placement = stored.decode(records.PlacementDoc) if stored is not None else None
        if stored is None or placement is None or placement.cluster != msg.cluster:
            return Reaction()
        if placement.state == "Replacing":
            # The previous child of this name is gone: its replacement may be placed now.
            waiting = replace(placement, state="Waiting", cluster="", finished=False,
                              reason="waiting for its queue to admit it")
            return Reaction(writes=[Write.put(records.PLACEMENT, msg.job, waiting, stored.version)]).then(self.wake.set)
        return Reaction(writes=[Write.delete(records.PLACEMENT, msg.job, stored.version)]).then(self.wake.set)

    # -- the admission and placement round ----------------------------------------------------------

    async def run_rounds(self, period: float) -> None:
        while True:
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=period)
            except TimeoutError:
                pass
            self.wake.clear()
            try:
                await self.round()
            except Exception:  # one failed round must not stop placement
                self.rt.log.exception("placement_round_failed")

    async def round(self) -> None:
        store = self.rt.store
        placements = {n: d.decode(records.PlacementDoc) for n, d in (await store.list(records.PLACEMENT)).items()}
        admissions = {n: d.decode(records.AdmissionDoc) for n, d in (await store.list(records.ADMISSION)).items()}
        capacities = await self._capacities()
        await self._forget_finished(placements, admissions)
        await self._admit(placements, admissions, capacities)
        gangs = await self._gangs(placements, admissions)
        for name, stored in (await store.list(records.PLACEMENT)).items():
            placement = stored.decode(records.PlacementDoc)
            if placement.state == "Waiting" and placement.owner in admissions and placement.owner not in gangs:
                cause = Cause(event_id=events.derive_id(name, f"place/{placement.requested_at!r}/{stored.version}"))
                reaction = self._try(cause, placement, capacities, stored.version)
                # Nothing new (still waiting for the same reason): commit nothing, or the marker of
                # this placement version would swallow the dispatch once room appears.
                if reaction.writes or reaction.outputs:
                    await self.rt.commit("global-scheduler-place", cause.event_id, reaction)

    # -- the cross-cluster gang -------------------------------------------------------------------

    async def _gangs(self, placements: dict[str, records.PlacementDoc],
                     admissions: dict[str, records.AdmissionDoc]) -> set[str]:
        """Advance every admitted HyperJob whose children span clusters; return their names."""
        owners = sorted({p.owner for p in placements.values() if p.hyperjob and p.owner in admissions})
        docs = await self.rt.store.get_many(records.HYPERJOB, owners) if owners else {}
        gangs = set()
        for owner, stored in docs.items():
            doc = stored.decode(records.HyperJobDoc) if stored else None
            required = domain.gang_size(doc) if doc else 0
            if doc is None or not required:
                continue
            gangs.add(owner)
            await self._advance_gang(doc, required, placements)
        return gangs

    async def _advance_gang(self, doc: records.HyperJobDoc, required: int,
                            placements: dict[str, records.PlacementDoc]) -> None:
        now = time.time()
        stored = await self.rt.store.get(records.GANG, doc.name)
        gang = stored.decode(fleetcore.HyperJobGang) if stored else None
        mine = {ref.name: placements.get(ref.name) for ref in doc.children}
        # Every child of a gang that already started is waiting again: they were all replaced (a
        # changed template), and the new children need a gang of their own.
        replaced = gang is not None and gang.phase == "Bound" and all(
            p is not None and p.state == "Waiting" for p in mine.values())
        if gang is None or replaced:
            if any(p is None or p.state != "Waiting" for p in mine.values()):
                return  # not every child has asked to be placed yet
            gang, decisions = fleetcore.start_gang(doc.name, {ref.name: ref.cluster for ref in doc.children},
                                                   required, now, attempt=gang.attempt + 1 if gang else 1)
        elif gang.phase == "Reserving" and now >= gang.deadline:
            gang, decisions = fleetcore.gang_step(gang, fleetcore.GangTimer(attempt=gang.attempt), now,
                                                  retry_delay=GANG_RETRY_DELAY)
        elif gang.phase == "Released" and gang.retry_at is not None and now >= gang.retry_at:
            gang, decisions = fleetcore.start_gang(doc.name, gang.children, required, now, attempt=gang.attempt + 1)
        else:
            return
        cause = Cause(event_id=events.derive_id(doc.name, f"gang/{doc.created!r}/{gang.attempt}/{gang.phase}/{stored.version if stored else 0}"))
        reaction = self._gang_decisions(cause, gang, decisions, mine)
        reaction.writes.append(Write.put(records.GANG, doc.name, gang, stored.version if stored else 0))
        await self.rt.commit("global-scheduler-gang", cause.event_id, reaction)

    async def on_reservation_held(self, msg: events.ReservationHeld) -> Reaction:
        stored = await self.rt.store.get(records.GANG, msg.hyperjob)
        if stored is None:
            return Reaction()
        gang = stored.decode(fleetcore.HyperJobGang)
        if msg.attempt != gang.attempt:
            return Reaction()  # a reservation of an earlier attempt: already released
        gang, decisions = fleetcore.gang_step(gang, fleetcore.ReservationHeld(child=msg.child, cluster=msg.cluster),
                                              time.time())
        reaction = self._gang_decisions(msg, gang, decisions, {})
        reaction.writes.append(Write.put(records.GANG, msg.hyperjob, gang, stored.version))
        return reaction

    def _gang_decisions(self, cause: events.Message | Cause, gang: fleetcore.HyperJobGang, decisions: list[Any],
                        placements: dict[str, records.PlacementDoc | None]) -> Reaction:
        """Reserve: dispatch the child gated (first attempt) or ask its cluster to hold it again;
        Bind: start it; Release: give its nodes back. Retry and timers live in the gang document."""
        reaction = Reaction()
        for d in decisions:
            if isinstance(d, fleetcore.Reserve) and placements.get(d.child) is not None:
                placement = replace(placements[d.child], state="Dispatched", cluster=d.cluster, reason="")  # type: ignore[arg-type]
                reaction.writes.append(Write.put(records.PLACEMENT, d.child, placement))
                reaction.publish(subjects.dispatch(d.cluster), self._dispatch(cause, placement, gang=gang.hyperjob))
            elif isinstance(d, fleetcore.Reserve | fleetcore.Bind | fleetcore.Release):
                action = {fleetcore.Reserve: "reserve", fleetcore.Bind: "start", fleetcore.Release: "release"}[type(d)]
                reaction.publish(subjects.gang_control(d.cluster), emit(
                    events.GangControl, cause, f"gang/{d.child}/{action}/{gang.attempt}", PRODUCER, child=d.child,
                    cluster=d.cluster, action=action, attempt=gang.attempt))
            elif isinstance(d, fleetcore.Retry):
                reaction.publish(subjects.CHILD_WAITING, emit(events.ChildPlacementWaiting, cause, "gang-retry",
                                                              PRODUCER, child="", hyperjob=gang.hyperjob,
                                                              reason=d.reason))
        return reaction

    async def _forget_finished(self, placements: dict[str, records.PlacementDoc],
                               admissions: dict[str, records.AdmissionDoc]) -> None:
        for owner in domain.finished_owners(placements, admissions):
            await self.rt.store.delete(records.ADMISSION, owner)
            await self.rt.store.delete(records.GANG, owner)
            del admissions[owner]

    async def _admit(self, placements: dict[str, records.PlacementDoc], admissions: dict[str, records.AdmissionDoc],
                     capacities: dict[str, fleetcore.ClusterCapacity]) -> None:
        waiting = domain.unadmitted_owners(placements, admissions)
        if not waiting:
            return
        owners = {n: d.decode(records.HyperJobDoc)
                  for n, d in (await self.rt.store.get_many(records.HYPERJOB, sorted(waiting))).items() if d}
        classes = {n: d.decode(records.PriorityClassDoc).value
                   for n, d in (await self.rt.store.list(records.PRIORITY_CLASS)).items()}
        candidates = [domain.candidate(doc, classes) for doc in owners.values()]
        queues = domain.fleet_queues({n: d.decode(records.QueueDoc) for n, d in (await self.rt.store.list(records.QUEUE)).items()})
        capacity = fleetcore.fleet_capacity(fleetcore.live_clusters(capacities, time.time()).values())
        admission = fleetcore.admit(queues, domain.allocated(admissions), candidates, capacity)
        by_name = {c.name: c for c in candidates}
        for owner in admission.admitted:
            await self._record_admission(by_name[owner], admissions)
        for owner, reason in admission.waiting.items():
            await self._record_wait(owner, f"queue {by_name[owner].queue}: {reason}", placements)

    async def _record_admission(self, candidate: fleetcore.Candidate, admissions: dict[str, records.AdmissionDoc]) -> None:
        doc = records.AdmissionDoc(owner=candidate.name, queue=candidate.queue, request=candidate.request,
                                   admitted_at=time.time())
        cause = Cause(event_id=events.derive_id(candidate.name, f"admitted/{candidate.created}"))
        reaction = Reaction(writes=[Write.put(records.ADMISSION, candidate.name, doc, 0)])
        reaction.publish(subjects.OWNER_ADMITTED, emit(events.OwnerAdmitted, cause, "admitted", PRODUCER,
                                                       name=candidate.name, queue=candidate.queue))
        await self.rt.commit("global-scheduler-admit", cause.event_id, reaction)
        admissions[candidate.name] = doc

    async def _record_wait(self, owner: str, reason: str, placements: dict[str, records.PlacementDoc]) -> None:
        for name, placement in placements.items():
            if placement.owner != owner or placement.reason == reason:
                continue
            stored = await self.rt.store.get(records.PLACEMENT, name)
            if stored is None:
                continue
            cause = Cause(event_id=events.derive_id(name, f"queue-wait/{placement.requested_at!r}/{stored.version}"))
            reaction = Reaction(writes=[Write.put(records.PLACEMENT, name, replace(placement, reason=reason), stored.version)])
            reaction.publish(subjects.CHILD_WAITING, emit(events.ChildPlacementWaiting, cause, "waiting", PRODUCER,
                                                          child=name, hyperjob=placement.hyperjob, reason=reason))
            await self.rt.commit("global-scheduler-wait", cause.event_id, reaction)

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
            if chosen.reason != placement.reason:
                reaction.writes.append(Write.put(records.PLACEMENT, placement.child,
                                                 replace(placement, reason=chosen.reason), version))
                reaction.publish(subjects.CHILD_WAITING, emit(
                    events.ChildPlacementWaiting, cause, "waiting", PRODUCER, child=placement.child,
                    hyperjob=placement.hyperjob, reason=chosen.reason))
            return reaction
        dispatched = replace(placement, state="Dispatched", cluster=chosen, reason="")
        reaction.writes.append(Write.put(records.PLACEMENT, placement.child, dispatched, version))
        return reaction.publish(subjects.dispatch(chosen), self._dispatch(cause, dispatched))

    @staticmethod
    def _dispatch(cause: events.Message | Cause, placement: records.PlacementDoc, gang: str = "") -> events.DispatchChild:
        return emit(events.DispatchChild, cause, f"dispatch/{placement.child}/{placement.cluster}", PRODUCER,
                    child=placement.child, cluster=placement.cluster, hyperjob=placement.hyperjob,
                    replicated_job=placement.replicated_job, job=placement.job, env=placement.env,
                    env_by_pod=placement.env_by_pod, rank_offset=placement.rank_offset,
                    world_size=placement.world_size, gang=gang)

    async def _capacities(self) -> dict[str, fleetcore.ClusterCapacity]:
        return {name: records.cluster_capacity(doc.decode(records.ClusterDoc))
                for name, doc in (await self.rt.store.list(records.CLUSTER)).items()}
