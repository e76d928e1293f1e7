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
        planned = domain.plan(hyperjob, clusters, time.time())
        if isinstance(planned, fleetcore.Waiting):
            waiting = replace(doc, waiting_reason=planned.reason)
            reaction.writes.append(Write.put(records.HYPERJOB, doc.name, waiting, expected_version))
            return reaction.publish(subjects.CHILD_WAITING, emit(
                events.ChildPlacementWaiting, cause, "waiting", PRODUCER, child="", hyperjob=doc.name,
                reason=planned.reason))
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
        planned_doc = replace(doc, children=domain.child_refs(planned), waiting_reason="")
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
            cause = Cause(event_id=events.derive_id(name, f"replan/{doc.generation}/{stored.version}"))
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
        status = await self.rt.store.get(records.HYPERJOB_STATUS, msg.name)
        names = [ref.name for ref in doc.children]
        phases = status.decode(records.HyperJobStatusDoc).child_phases(names) if status else dict.fromkeys(names, "Pending")
        lifecycle = fleetcore.settle_lifecycle(doc.lifecycle, phases)  # type: ignore[arg-type]
        lifecycle, decisions = fleetcore.hyperjob_command(msg.action, phases, lifecycle)
        clusters = {ref.name: ref.cluster for ref in doc.children}
        reaction = _answer(msg, events.RequestAccepted, kind="HyperJob", name=msg.name, outcome="commanded")
        for decision in decisions:
            if isinstance(decision, fleetcore.ChildCommand) and clusters.get(decision.child):
                cluster = clusters[decision.child]
                reaction.publish(subjects.command_child(cluster), emit(
                    events.CommandChild, msg, f"command/{decision.child}", PRODUCER, child=decision.child,
                    cluster=cluster, action=decision.action, reason=decision.reason))
        restarts = doc.restarts + (1 if msg.action == "restart" else 0)
        reaction.writes.append(Write.put(records.HYPERJOB, msg.name, replace(doc, lifecycle=lifecycle, restarts=restarts),
                                         stored.version if stored else 0))
        return reaction

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


def _identity(manifest: dict[str, Any]) -> tuple[str, str]:
    metadata = manifest.get("metadata")
    name = metadata.get("name", "") if isinstance(metadata, dict) else ""
    return str(manifest.get("kind", "")), str(name)


def _queues_of(doc: records.HyperJobDoc) -> set[str]:
    manifest = api.decode(doc.manifest)
    specs = [manifest.spec] if isinstance(manifest, api.Job) else [rj.template_spec for rj in manifest.spec.replicated_jobs]  # type: ignore[union-attr]
    return {spec.queue or api.DEFAULT_QUEUE for spec in specs}
