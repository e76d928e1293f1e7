"""The splitter's handlers: apply, delete, and the children's removal."""

from __future__ import annotations

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

PRODUCER = "splitter"


class Splitter:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    # -- apply --------------------------------------------------------------------------------------

    async def on_apply(self, msg: events.ApplyManifest) -> Reaction:
        kind, name = _identity(msg.manifest)
        try:
            manifest = api.decode(msg.manifest)
            if isinstance(manifest, api.Queue):
                return await self._apply_queue(msg, manifest)
            if isinstance(manifest, api.PriorityClass):
                return await self._apply_priority_class(msg, manifest)
            if isinstance(manifest, api.Job):
                return await self._apply_job(msg, manifest)
            if isinstance(manifest, api.HyperJob):
                return await self._apply_hyperjob(msg, manifest)
            raise api.ManifestError("$.kind", f"{kind} objects are created by the job-controller for each Job; "
                                              "apply a Job or a HyperJob")
        except api.ManifestError as exc:
            return _answer(msg, events.RequestRejected, kind=kind, name=name, reason=str(exc))

    async def _apply_queue(self, msg: events.ApplyManifest, queue: api.Queue) -> Reaction:
        name = queue.metadata.name
        existing = await self.rt.store.get(records.QUEUE, name)
        created = existing.decode(records.QueueDoc).created if existing else time.time()
        doc = records.QueueDoc(manifest=api.encode(queue), state=queue.spec.state or "Open", created=created)
        outcome = "created" if existing is None else "unchanged" if existing.decode(records.QueueDoc) == doc else "configured"
        reaction = _answer(msg, events.RequestAccepted, kind="Queue", name=name, outcome=outcome)
        reaction.writes.append(Write.put(records.QUEUE, name, doc, existing.version if existing else 0))
        return reaction

    async def _apply_priority_class(self, msg: events.ApplyManifest, pc: api.PriorityClass) -> Reaction:
        name = pc.metadata.name
        existing = await self.rt.store.get(records.PRIORITY_CLASS, name)
        reaction = _answer(msg, events.RequestAccepted, kind="PriorityClass", name=name,
                           outcome="created" if existing is None else "configured")
        reaction.writes.append(Write.put(records.PRIORITY_CLASS, name,
                                         records.PriorityClassDoc(manifest=api.encode(pc), value=pc.value)))
        return reaction

    async def _apply_job(self, msg: events.ApplyManifest, job: api.Job) -> Reaction:
        name = job.metadata.name
        api.check_queue_reference(job.spec.queue, await self._queue_states(), "$.spec.queue")
        existing = await self.rt.store.get(records.HYPERJOB, name)
        if existing is not None:
            doc = existing.decode(records.HyperJobDoc)
            if doc.manifest == api.encode(job):
                return _answer(msg, events.RequestAccepted, kind="Job", name=name, outcome="unchanged")
            raise api.ManifestError("$.metadata.name", f"{doc.manifest.get('kind', 'object')} {name!r} already exists; "
                                                       "a running Job's tasks cannot change (delete it first)")
        clusters = sorted((await self.rt.store.list(records.CLUSTER)))
        total = api.template_replicas(job.spec)
        doc = records.HyperJobDoc(name=name, manifest=api.encode(job), created=time.time(), plain=True,
                                  children=[records.ChildRef(name=name, replicated_job="", index=0, replicas=total)])
        reaction = _answer(msg, events.RequestAccepted, kind="Job", name=name, outcome="created")
        reaction.writes.append(Write.put(records.HYPERJOB, name, doc, 0))
        return reaction.publish(subjects.PLACE_CHILD, emit(
            events.PlaceChild, msg, f"place/{name}", PRODUCER, child=name, clusters=clusters, job=api.encode(job)))

    async def _apply_hyperjob(self, msg: events.ApplyManifest, hyperjob: api.HyperJob) -> Reaction:
        name = hyperjob.metadata.name
        clusters = {n: d.decode(records.ClusterDoc) for n, d in (await self.rt.store.list(records.CLUSTER)).items()}
        api.check_references(hyperjob, clusters, await self._queue_states())
        existing = await self.rt.store.get(records.HYPERJOB, name)
        previous = existing.decode(records.HyperJobDoc) if existing else None
        if previous is not None and previous.plain:
            raise api.ManifestError("$.metadata.name", f"a Job named {name!r} already exists")
        if previous is not None and previous.deleting:
            raise api.ManifestError("$.metadata.name", f"HyperJob {name!r} is being deleted; apply it again once it is gone")
        if previous is not None and previous.manifest == api.encode(hyperjob):
            return _answer(msg, events.RequestAccepted, kind="HyperJob", name=name, outcome="unchanged")
        doc = records.HyperJobDoc(name=name, manifest=api.encode(hyperjob), created=previous.created if previous else time.time(),
                                  generation=previous.generation + 1 if previous else 1,
                                  children=previous.children if previous else [])
        reaction = _answer(msg, events.RequestAccepted, kind="HyperJob", name=name,
                           outcome="created" if previous is None else "configured")
        return self._split(reaction, msg, doc, hyperjob, clusters, existing.version if existing else 0)

    def _split(self, reaction: Reaction, cause: events.Message | Cause, doc: records.HyperJobDoc,
               hyperjob: api.HyperJob, clusters: dict[str, records.ClusterDoc], expected_version: int) -> Reaction:
        result = domain.plan(hyperjob, clusters, time.time())
        if isinstance(result, fleetcore.Waiting):
            reaction.writes.append(Write.put(records.HYPERJOB, doc.name, replace(doc, waiting_reason=result.reason),
                                             expected_version))
            return reaction.publish(subjects.CHILD_WAITING, emit(
                events.ChildPlacementWaiting, cause, "waiting", PRODUCER, child="", hyperjob=doc.name,
                reason=result.reason))
        planned, world_size = result
        place, remove = domain.changes(doc.children, planned)
        for ref in remove:
            reaction.publish(subjects.UNPLACE_CHILD, emit(events.RemoveChild, cause, f"unplace/{ref.name}",
                                                          PRODUCER, child=ref.name, cluster=ref.cluster))
        for p in place:
            reaction.publish(subjects.PLACE_CHILD, emit(
                events.PlaceChild, cause, f"place/{p.child.name}/{p.child.template_hash}", PRODUCER,
                child=p.child.name, hyperjob=doc.name, replicated_job=p.child.replicated_job, clusters=[p.child.cluster],
                job=api.encode(p.child.job), env_by_pod=p.env_by_pod, rank_offset=p.child.rank_offset,
                world_size=p.child.world_size))
        planned_doc = replace(doc, children=domain.child_refs(planned), waiting_reason="", world_size=world_size)
        reaction.writes.append(Write.put(records.HYPERJOB, doc.name, planned_doc, expected_version))
        return reaction

    async def replan_waiting(self) -> None:
        """HyperJobs that did not fit anywhere are planned again as capacity changes."""
        clusters = {n: d.decode(records.ClusterDoc) for n, d in (await self.rt.store.list(records.CLUSTER)).items()}
        for name, stored in (await self.rt.store.list(records.HYPERJOB)).items():
            doc = stored.decode(records.HyperJobDoc)
            if doc.plain or doc.deleting or doc.children:
                continue
            hyperjob = api.decode(doc.manifest)
            assert isinstance(hyperjob, api.HyperJob)
            cause = Cause(event_id=events.derive_id(name, f"replan/{doc.created!r}/{doc.generation}/{stored.version}"))
            reaction = self._split(Reaction(), cause, doc, hyperjob, clusters, stored.version)
            if not doc.waiting_reason or any(isinstance(m, events.PlaceChild) for _, m in reaction.outputs):
                await self.rt.commit("splitter-replan", cause.event_id, reaction)

    # -- delete -------------------------------------------------------------------------------------

    async def on_delete(self, msg: events.DeleteObject) -> Reaction:
        kind = {"Job": records.HYPERJOB, "HyperJob": records.HYPERJOB, "Queue": records.QUEUE,
                "PriorityClass": records.PRIORITY_CLASS}.get(msg.kind)
        stored = await self.rt.store.get(kind, msg.name) if kind else None
        if stored is None:
            return _answer(msg, events.RequestRejected, kind=msg.kind, name=msg.name,
                           reason=f"{msg.kind} {msg.name!r} not found")
        if kind == records.QUEUE:
            return await self._delete_queue(msg)
        if kind == records.PRIORITY_CLASS:
            reaction = _answer(msg, events.RequestAccepted, kind=msg.kind, name=msg.name, outcome="deleted")
            reaction.writes.append(Write.delete(kind, msg.name))
            return reaction
        doc = stored.decode(records.HyperJobDoc)
        reaction = _answer(msg, events.RequestAccepted, kind=msg.kind, name=msg.name, outcome="deleting")
        return self._start_deleting(reaction, msg, doc, stored.version)

    def _start_deleting(self, reaction: Reaction, cause: events.Message, doc: records.HyperJobDoc,
                        version: int) -> Reaction:
        if not doc.children:
            reaction.writes.append(Write.delete(records.HYPERJOB, doc.name, version))
            return reaction.publish(subjects.HYPERJOB_DELETED, emit(events.HyperJobDeleted, cause, "deleted", PRODUCER,
                                                                    name=doc.name))
        for ref in doc.children:
            reaction.publish(subjects.UNPLACE_CHILD, emit(events.RemoveChild, cause, f"unplace/{ref.name}", PRODUCER,
                                                          child=ref.name, cluster=ref.cluster))
        deleting = replace(doc, deleting=True)
        reaction.writes.append(Write.put(records.HYPERJOB, doc.name, deleting, version))
        return reaction

    async def _delete_queue(self, msg: events.DeleteObject) -> Reaction:
        users = [d.decode(records.HyperJobDoc).name for d in (await self.rt.store.list(records.HYPERJOB)).values()
                 if msg.name in _queues_of(d.decode(records.HyperJobDoc))]
        if users:
            return _answer(msg, events.RequestRejected, kind="Queue", name=msg.name,
                           reason=f"queue {msg.name!r} is used by {', '.join(sorted(users))}")
        reaction = _answer(msg, events.RequestAccepted, kind="Queue", name=msg.name, outcome="deleted")
        reaction.writes.append(Write.delete(records.QUEUE, msg.name))
        return reaction

    # -- commands on the whole HyperJob ----------------------------------------------------------------

    async def on_command(self, msg: events.CommandHyperJob) -> Reaction:
        """suspend / resume / restart / abort act on every child, through its cluster's job-controller."""
        stored = await self.rt.store.get(records.HYPERJOB, msg.name)
        doc = stored.decode(records.HyperJobDoc) if stored else None
        if doc is None or doc.plain or doc.deleting:
            reason = f"HyperJob {msg.name!r} not found" if doc is None or doc.plain else f"HyperJob {msg.name!r} is being deleted"
            return _answer(msg, events.RequestRejected, kind="HyperJob", name=msg.name, reason=reason)
        phases = await self._child_phases(doc)
        lifecycle = fleetcore.settle_lifecycle(doc.lifecycle, phases)  # type: ignore[arg-type]
        lifecycle, decisions = fleetcore.hyperjob_command(msg.action, phases, lifecycle)
        reaction = _answer(msg, events.RequestAccepted, kind="HyperJob", name=msg.name, outcome="commanded")
        self._carry_out(reaction, msg, doc, decisions)
        restarts = doc.restarts + (1 if msg.action == "restart" else 0)
        reaction.writes.append(Write.put(records.HYPERJOB, msg.name, replace(doc, lifecycle=lifecycle, restarts=restarts),
                                         stored.version if stored else 0))
        return reaction

    # -- failover and failed children --------------------------------------------------------------

    async def failover_round(self) -> None:
        """Children on a lost cluster (silent for 30 s), or withdrawn for want of room, are placed
        again on another eligible cluster where they fit, keeping their names."""
        now = time.time()
        capacities = await self._capacities()
        for name, stored in (await self.rt.store.list(records.HYPERJOB)).items():
            doc = stored.decode(records.HyperJobDoc)
            if doc.plain or doc.deleting or not doc.children or doc.lifecycle != "Active":
                continue
            phases = await self._child_phases(doc)
            finished = [c for c, phase in phases.items() if phase in fleetcore.TERMINAL_CHILD_PHASES]
            plan, decisions = fleetcore.failover(_hyperjob(doc), domain.split_plan(doc), capacities, now,
                                                 finished=finished)
            if not decisions:
                continue
            cause = Cause(event_id=events.derive_id(name, f"failover/{doc.created!r}/{stored.version}"))
            reaction = self._carry_out(Reaction(), cause, doc, decisions)
            reaction.writes.append(Write.put(records.HYPERJOB, name, domain.with_plan(doc, plan), stored.version))
            await self.rt.commit("splitter-failover", cause.event_id, reaction)

    async def on_job_phase(self, msg: events.JobPhaseChanged) -> Reaction:
        """A child failed beyond its own retries: the HyperJob's childFailurePolicy decides."""
        if msg.new != "Failed" or not msg.hyperjob:
            return Reaction()
        stored = await self.rt.store.get(records.HYPERJOB, msg.hyperjob)
        doc = stored.decode(records.HyperJobDoc) if stored else None
        if doc is None or doc.deleting or doc.lifecycle != "Active" or msg.job not in {r.name for r in doc.children}:
            return Reaction()
        phases = {**await self._child_phases(doc), msg.job: "Failed"}
        plan, decisions = fleetcore.child_failed(_hyperjob(doc), domain.split_plan(doc), msg.job,
                                                 await self._capacities(), time.time(), phases)
        reaction = self._carry_out(Reaction(), msg, doc, decisions)
        lifecycle = next((d.lifecycle for d in decisions if isinstance(d, fleetcore.SetLifecycle)), doc.lifecycle)
        updated = replace(domain.with_plan(doc, plan), lifecycle=lifecycle,
                          restarts=doc.restarts + (1 if lifecycle == "Restarting" else 0))
        reaction.writes.append(Write.put(records.HYPERJOB, doc.name, updated, stored.version if stored else 0))
        return reaction

    def _carry_out(self, reaction: Reaction, cause: events.Message | Cause, doc: records.HyperJobDoc,
                   decisions: list[Any]) -> Reaction:
        """Send fleetcore's decisions about children where they must go (lifecycle is the caller's)."""
        clusters = {ref.name: ref.cluster for ref in doc.children}
        for d in decisions:
            if isinstance(d, fleetcore.ChildCommand) and clusters.get(d.child):
                reaction.publish(subjects.command_child(clusters[d.child]), emit(
                    events.CommandChild, cause, f"command/{d.child}", PRODUCER, child=d.child,
                    cluster=clusters[d.child], action=d.action, reason=d.reason))
            elif isinstance(d, fleetcore.ChildMove | fleetcore.ChildUnplaced):
                to = d.to_cluster if isinstance(d, fleetcore.ChildMove) else ""
                reaction.publish(subjects.MOVE_CHILD, emit(events.MoveChild, cause, f"move/{d.child}/{to}", PRODUCER,
                                                           child=d.child, to_cluster=to, reason=d.reason))
        return reaction

    async def _child_phases(self, doc: records.HyperJobDoc) -> dict[str, str]:
        status = await self.rt.store.get(records.HYPERJOB_STATUS, doc.name)
        names = [ref.name for ref in doc.children]
        return status.decode(records.HyperJobStatusDoc).child_phases(names) if status else dict.fromkeys(names, "Pending")

    async def _capacities(self) -> dict[str, fleetcore.ClusterCapacity]:
        return {n: records.cluster_capacity(d.decode(records.ClusterDoc))
                for n, d in (await self.rt.store.list(records.CLUSTER)).items()}

    async def on_job_removed(self, msg: events.JobRemoved) -> Reaction:
        """A child is gone from its cluster; the last one gone ends a deletion."""
        owner = msg.hyperjob or msg.job
        stored = await self.rt.store.get(records.HYPERJOB, owner)
        if stored is None:
            return Reaction()
        doc = stored.decode(records.HyperJobDoc)
        if not doc.deleting:
            return Reaction()
        remaining = replace(doc, children=[ref for ref in doc.children if ref.name != msg.job])
        if not remaining.children:
            return self._start_deleting(Reaction(), msg, remaining, stored.version)
        return Reaction(writes=[Write.put(records.HYPERJOB, owner, remaining, stored.version)])

    async def _queue_states(self) -> dict[str, str]:
        states = {n: d.decode(records.QueueDoc).state for n, d in (await self.rt.store.list(records.QUEUE)).items()}
        states.setdefault(api.DEFAULT_QUEUE, "Open")
        return states


def _answer(msg: events.Message, message_type: type[Any], **fields: Any) -> Reaction:
    return Reaction().publish(subjects.result(msg.event_id), emit(message_type, msg, "answer", PRODUCER, **fields))


def _hyperjob(doc: records.HyperJobDoc) -> api.HyperJob:
    hyperjob = api.decode(doc.manifest)
    assert isinstance(hyperjob, api.HyperJob)
    return hyperjob


def _identity(manifest: dict[str, Any]) -> tuple[str, str]:
    metadata = manifest.get("metadata")
    name = metadata.get("name", "") if isinstance(metadata, dict) else ""
    return str(manifest.get("kind", "")), str(name)


def _queues_of(doc: records.HyperJobDoc) -> set[str]:
    manifest = api.decode(doc.manifest)
    specs = [manifest.spec] if isinstance(manifest, api.Job) else [rj.template_spec for rj in manifest.spec.replicated_jobs]  # type: ignore[union-attr]
    return {spec.queue or api.DEFAULT_QUEUE for spec in specs}
