"""Admission of what is applied: each kind validated and answered, the configuration kinds
(Queue, PriorityClass) sent out, and the owners (HyperJob, plain Job or Kubeflow job, PodGroup)
recorded and submitted to their queue."""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from hyperjob import api, events, fleetcore, records
from hyperjob.bus import Delivery
from hyperjob.events import subjects
from hyperjob.servicekit import Reaction, answers
from hyperjob.telemetry.spans import decision

from . import domain, messages
from .planning import Planner
from .state import SplitterState


class Admission:
    """Admits applied objects and submits owners for admission by their queue.

    Invariants, enforced here:
    - Every request is answered on ``hj.result.<request>`` (an unreadable one too, when it says
      where); a rejected one (``api.ManifestError``, naming the field) changes nothing.
    - Object names are unique per namespace, and one fleet name (``domain.owner_key``) belongs
      to one object: a plain Job or PodGroup is refused when an object of another namespace goes
      by its name on the clusters (ADR 0010), a plain Job also when a HyperJob's child does.
    - An object applied as it is kept is ``unchanged`` and sends nothing; a HyperJob being
      deleted takes no apply; a running plain Job's tasks never change.
    - A HyperJob no split could ever hold asks nothing of its queue (``submit``): it says why,
      once, until the fleet could hold it (the re-planning round submits it then).
    """

    def __init__(self, state: SplitterState, planner: Planner) -> None:
        self.state = state
        self.planner = planner
        self.rt = state.rt

    def on_apply(self, msg: events.ApplyManifest) -> Reaction | None:
        kind, name = domain.manifest_kind(msg.manifest)
        if kind in api.WORKFLOW_KINDS:
            return None  # the workflow-controller's to answer
        try:
            scoped = domain.scoped_manifest(msg)
            manifest = api.decode(scoped)
            if isinstance(manifest, api.Queue):
                return self._apply_queue(msg, manifest)
            if isinstance(manifest, api.PriorityClass):
                return self._apply_priority_class(msg, manifest)
            if isinstance(manifest, api.Job):
                return self._apply_job(msg, manifest, scoped)
            if isinstance(manifest, api.HyperJob):
                return self._apply_hyperjob(msg, manifest)
            return self._apply_podgroup(msg, api.expect_kind(manifest, api.PodGroup))
        except api.ManifestError as exc:
            return answers.rejected(self.rt, msg, kind=kind, name=name, reason=str(exc))

    async def on_unreadable(self, delivery: Delivery, error: Exception) -> None:
        """A request that is not one (the wrong shape, an unknown type) is answered all the same
        when it says where (its ``event_id``), naming what is wrong: a program is never left to
        silence. It is dead-lettered too (``hyperjob get dlq``)."""
        found = domain.unreadable_request(delivery.data)
        if found is None:
            return
        request_id, kind, name = found
        answer = events.RequestRejected(
            event_id=events.derive_id(request_id, "answer"),
            occurred_at=self.rt.now(),
            producer=self.rt.service,
            causation_id=request_id,
            kind=kind,
            name=name,
            reason=str(error)[:1000],
        )
        try:
            await self.rt.bus.publish(subjects.result(request_id), events.encode(answer), msg_id=answer.event_id)
        except Exception as exc:  # noqa: BLE001 - the dead letter still records it
            self.rt.log.warning("unreadable_request_unanswered", request=request_id, error=str(exc))

    def _apply_queue(self, msg: events.ApplyManifest, queue: api.Queue) -> Reaction:
        domain.check_queue(queue, self.state.cfg())
        name = queue.metadata.name
        existing = self.state.queues.get(name)
        state = (queue.status.state if queue.status else None) or queue.spec.state or "Open"
        doc = records.QueueDoc(
            manifest=api.encode(queue), state=state, created=existing.created if existing else self.rt.now()
        )
        outcome: events.Outcome = "created" if existing is None else "unchanged" if existing == doc else "configured"
        reaction = answers.accepted(self.rt, msg, kind="Queue", name=name, outcome=outcome)
        if outcome != "unchanged":
            self.state.queues.put(name, doc)
            reaction.publish(subjects.queue_config(name), messages.queue_changed(self.rt, msg, name, doc))
        return reaction

    def _apply_priority_class(self, msg: events.ApplyManifest, pc: api.PriorityClass) -> Reaction:
        name = pc.metadata.name
        existing = self.state.classes.get(name)
        doc = records.PriorityClassDoc(manifest=api.encode(pc), value=pc.value, global_default=pc.global_default)
        reaction = answers.accepted(
            self.rt, msg, kind="PriorityClass", name=name, outcome="created" if existing is None else "configured"
        )
        self.state.classes.put(name, doc)
        return reaction.publish(
            subjects.priority_class_config(name),
            events.PriorityClassChanged(
                **self.rt.envelope(msg, f"priorityclass/{name}"),
                name=name,
                value=pc.value,
                global_default=pc.global_default,
                preemption_policy=pc.preemption_policy or "",
            ),
        )

    def _apply_job(self, msg: events.ApplyManifest, job: api.Job, applied: dict[str, Any]) -> Reaction:
        """A Volcano Job, or the one a Kubeflow job (``applied``) translates to: the translation runs,
        the Kubeflow manifest is kept as applied (``get pytorchjob x -o yaml`` prints it back)."""
        name, namespace = job.metadata.name, job.metadata.namespace
        key = domain.owner_key("Job", namespace, name)
        kind = api.applied_kind(job.metadata.annotations, job.kind)  # the answer names the kind applied
        domain.check_job_references(job.spec, "$.spec", self.state.cfg())
        existing = self._same_name_elsewhere(key, name, namespace)
        owner = self._hyperjob_with_child(key)
        if owner:
            raise api.ManifestError(
                "$.metadata.name", f"a job named {key!r} already exists (a child of HyperJob {owner!r})"
            )
        if existing is not None:
            if existing.manifest == api.encode(job):
                return answers.accepted(self.rt, msg, kind=kind, name=name, outcome="unchanged")
            raise api.ManifestError(
                "$.metadata.name",
                f"{existing.manifest.get('kind', 'object')} {name!r} already "
                "exists; a running Job's tasks cannot change (delete it first)",
            )
        doc = records.HyperJobDoc(
            name=key,
            manifest=api.encode(job),
            created=self.rt.now(),
            plain=True,
            children=[events.ChildRef(name=key, replicas=api.template_replicas(job.spec))],
            applied=applied if kind != job.kind else {},
        )
        reaction = answers.accepted(self.rt, msg, kind=kind, name=name, outcome="created")
        return self.submit(reaction, msg, doc)

    def _hyperjob_with_child(self, name: str) -> str:
        """The first HyperJob (by name) with a child named ``name`` ("" if none), found through the
        name index rather than a scan of every HyperJob's children."""
        owners = (
            owner for owner in self.state.owners_of_name.names(name) if not self.state.hyperjobs.require(owner).plain
        )
        return next(owners, "")

    def _apply_podgroup(self, msg: events.ApplyManifest, podgroup: api.PodGroup) -> Reaction:
        """A PodGroup on its own (no Job): admitted and scheduled like any, with no pods."""
        name = podgroup.metadata.name
        key = domain.owner_key("PodGroup", podgroup.metadata.namespace, name)
        domain.check_podgroup_references(podgroup, self.state.cfg())
        existing = self._same_name_elsewhere(key, name, podgroup.metadata.namespace)
        if existing is not None:
            if existing.manifest == api.encode(podgroup):
                return answers.accepted(self.rt, msg, kind="PodGroup", name=name, outcome="unchanged")
            raise api.ManifestError("$.metadata.name", f"podgroup {name!r} already exists")
        doc = records.HyperJobDoc(
            name=key,
            manifest=api.encode(podgroup),
            created=self.rt.now(),
            plain=True,
            children=[events.ChildRef(name=key)],
        )
        reaction = answers.accepted(self.rt, msg, kind="PodGroup", name=name, outcome="created")
        return self.submit(reaction, msg, doc)

    def _apply_hyperjob(self, msg: events.ApplyManifest, hyperjob: api.HyperJob) -> Reaction:
        name, key = hyperjob.metadata.name, api.object_key(hyperjob.metadata.namespace, hyperjob.metadata.name)
        domain.check_hyperjob_references(hyperjob, self.state.cfg())
        previous = self.state.hyperjobs.get(key)
        if previous is not None and previous.plain:
            raise api.ManifestError("$.metadata.name", f"a Job named {name!r} already exists")
        if previous is not None and previous.deleting:
            raise api.ManifestError(
                "$.metadata.name", f"HyperJob {name!r} is being deleted; apply it again once it is gone"
            )
        if previous is not None and previous.manifest == api.encode(hyperjob):
            return answers.accepted(self.rt, msg, kind="HyperJob", name=name, outcome="unchanged")
        reaction = answers.accepted(
            self.rt, msg, kind="HyperJob", name=name, outcome="created" if previous is None else "configured"
        )
        stored = api.encode(hyperjob)
        self.state.decoded.keep(key, stored, hyperjob)
        if previous is None:
            doc = records.HyperJobDoc(name=key, manifest=stored, created=self.rt.now())
            return self.submit(reaction, msg, doc)
        doc = replace(previous, manifest=stored, generation=previous.generation + 1)
        reaction = self.submit(reaction, msg, doc)
        return self.planner.split(reaction, msg, doc) if doc.admitted else reaction

    def _same_name_elsewhere(self, key: str, name: str, namespace: str) -> records.HyperJobDoc | None:
        """The plain Job or PodGroup kept under the fleet name ``key`` (``domain.owner_key``). One
        of another namespace goes by the same name on the clusters (``team-b-x`` in ``default``
        and ``x`` in ``team-b``), so this one is refused (ADR 0010)."""
        existing = self.state.hyperjobs.get(key)
        if existing is not None and domain.namespace_of(existing) != namespace:
            kind = existing.manifest.get("kind", "object")
            raise api.ManifestError(
                "$.metadata.name",
                f"{namespace}/{name} goes by {key!r} on the clusters, as {kind} {domain.applied_name(existing)!r} "
                f"of namespace {domain.namespace_of(existing)!r} does (a plain Job's cluster name is "
                "<namespace>-<name> outside default)",
            )
        return existing

    def submit(self, reaction: Reaction, cause: events.Message | str, doc: records.HyperJobDoc) -> Reaction:
        """Record the owner and ask its queue to admit it (again, for a new generation), unless no
        split could ever hold it: that is said at once, and it asks nothing of its queue (where it
        would wait as a queue limit and head a strict FIFO line) until the fleet can (``replan``)."""
        never = (
            ""
            if doc.plain or doc.admitted
            else fleetcore.inadmissible(self.state.hyperjob(doc), self.state.capacity.clusters)
        )
        if never:
            return self._inadmissible(reaction, cause, doc, never)
        if not doc.admitted and doc.waiting_reason.startswith(fleetcore.INADMISSIBLE):
            doc = replace(doc, waiting_reason="")
        self.state.put(doc)
        return reaction.publish(
            subjects.OWNER_SUBMITTED,
            domain.submission(
                self.rt.envelope(cause, f"submit/{doc.name}/{doc.generation}"),
                doc,
                self.state.cfg(),
                self.state.decoded,
            ),
        )

    def _inadmissible(
        self, reaction: Reaction, cause: events.Message | str, doc: records.HyperJobDoc, reason: str
    ) -> Reaction:
        """Hold a HyperJob no split could ever hold out of its queue, saying why (once)."""
        if doc.waiting_reason == reason:
            self.state.put(doc)
            return reaction
        self.state.put(replace(doc, waiting_reason=reason))
        decision("hyperjob_inadmissible", hyperjob=doc.name, reason=reason)
        if doc.generation > 1:  # the generation before may wait in its queue
            reaction.publish(
                subjects.OWNER_WITHDRAWN,
                events.OwnerWithdrawn(**self.rt.envelope(cause, f"withdrawn/{doc.generation}"), name=doc.name),
            )
        return reaction.publish(subjects.CHILD_WAITING, messages.child_waiting(self.rt, cause, doc, reason))
