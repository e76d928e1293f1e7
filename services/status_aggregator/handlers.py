"""Folding child news into HyperJob statuses."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

from msgspec.structs import replace

import events
import fleetcore
import records
from events import subjects
from servicekit import Reaction, Runtime, emit
from store import Write

from . import domain

PRODUCER = "status-aggregator"


class StatusAggregator:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def on_job_phase(self, msg: events.JobPhaseChanged) -> Reaction:
        if not msg.hyperjob:
            return Reaction()  # a plain Job: its own record is its status
        news = fleetcore.ChildStatus(
            name=msg.job, replicated_job=msg.replicated_job, cluster=msg.cluster, phase=msg.new, reason=msg.reason,
            last_transition_time=msg.occurred_at, replicas=msg.pending + msg.running + msg.succeeded + msg.failed
            + msg.terminating, pending=msg.pending, running=msg.running, succeeded=msg.succeeded,
            failed=msg.failed, terminating=msg.terminating, unknown=msg.unknown)
        return await self._update(msg, msg.hyperjob, lambda doc: domain.child_changed(doc, news))

    async def on_waiting(self, msg: events.ChildPlacementWaiting) -> Reaction:
        if not msg.hyperjob:
            return Reaction()
        return await self._update(msg, msg.hyperjob, lambda doc: replace(doc, waiting_reason=msg.reason))

    async def on_admitted(self, msg: events.OwnerAdmitted) -> Reaction:
        return await self._update(msg, msg.name, lambda doc: doc)

    async def on_deleted(self, msg: events.HyperJobDeleted) -> Reaction:
        return Reaction(writes=[Write.delete(records.HYPERJOB_STATUS, msg.name)])

    async def _update(self, msg: events.Message, name: str, change: object) -> Reaction:
        async with self._locks[name]:
            owner = await self.rt.store.get(records.HYPERJOB, name)
            if owner is None or owner.decode(records.HyperJobDoc).plain:
                return Reaction()  # gone, or a plain Job (its own record is its status)
            stored = await self.rt.store.get(records.HYPERJOB_STATUS, name)
            doc = stored.decode(domain.AggregateDoc) if stored else domain.AggregateDoc(name=name)
            admitted = await self.rt.store.get(records.ADMISSION, name) is not None
            new = domain.recompute(change(doc), owner.decode(records.HyperJobDoc), admitted, time.time())  # type: ignore[operator]
            reaction = Reaction(writes=[Write.put(records.HYPERJOB_STATUS, name, new, stored.version if stored else 0)])
            if (new.phase, new.status) != (doc.phase, doc.status):
                reaction.publish(subjects.HYPERJOB_STATUS, emit(events.HyperJobStatusChanged, msg, "status", PRODUCER,
                                                                name=name, phase=new.phase, status=new.status))
            return reaction
