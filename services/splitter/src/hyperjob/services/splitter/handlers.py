"""The splitter: the API front door, and the owner of every HyperJob's spec, plan and lifecycle.

An applied object is validated (structure in ``api``; what it refers to against the splitter's
own configuration and the clusters it hears of) and answered on ``hj.result.<request>``; a
rejected one changes nothing. Queues and priority classes go out on the configuration stream.
A HyperJob (or plain Job) is submitted for admission; once admitted it is split and its
children are asked to be placed. The splitter follows each child's phase (the child-failure
policy, the lifecycle, failover when a cluster is lost) and finishes a deletion only when every
child is gone from every cluster.
"""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from hyperjob import api, events, fleetcore, records
from hyperjob.bus import Delivery
from hyperjob.events import subjects
from hyperjob.servicekit import Reaction, Runtime
from hyperjob.telemetry.spans import decision

from . import domain, messages
from .announce import SpecAnnouncer
from .commands import Commands
from .config import Settings
from .deletion import Deletion
from .planning import Planner
from .room import Room
from .state import SplitterState

# How a HyperJob's waiting reason starts while a child waits on a lost cluster for room elsewhere.
WAITS = "failover waits:"


class Splitter:
    def __init__(self, runtime: Runtime, settings: Settings | None = None) -> None:
        settings = settings or Settings()
        self.rt = runtime
        self.state = state = SplitterState(runtime)
        self.hyperjobs, self.owners_of_name = state.hyperjobs, state.owners_of_name
        self.queues, self.classes, self.capacity, self.decoded = (
            state.queues,
            state.classes,
            state.capacity,
            state.decoded,
        )
        self.lost: set[str] = set()
        self.room = Room(state)
        self.planner = Planner(state, self.room)
        self.deletion = Deletion(state)
        self.commands = Commands(state, self.planner)
        self.gate = fleetcore.FailoverGate(rate=settings.failover_rate, burst=settings.failover_burst)
        self.paused = ""
        self.announcer = SpecAnnouncer(state)

    def cfg(self) -> domain.Config:
        return self.state.cfg()

    # -- what the clusters say -----------------------------------------------------------------------

    def on_capacity(self, msg: events.ClusterCapacityReported) -> None:
        changed = self.capacity.report(msg, self.rt.now())
        lost = {
            name for name, cap in self.capacity.clusters.items() if fleetcore.cluster_lost(cap, self.capacity.newest)
        }
        if changed or lost != self.lost:
            self.lost = lost
            self.rt.kick("replan")

    def on_heartbeat(self, msg: events.AgentHeartbeat) -> None:
        """Nodes that still report keep their silent cluster's children where they are (a hung
        control plane is not a lost cluster: ``fleetcore.control_plane_hung``)."""
        self.capacity.beat(msg, self.rt.now())

    # -- apply ---------------------------------------------------------------------------------------

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
            return messages.rejected(self.rt, msg, kind=kind, name=name, reason=str(exc))

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
        domain.check_queue(queue, self.cfg())
        name = queue.metadata.name
        existing = self.queues.get(name)
        state = (queue.status.state if queue.status else None) or queue.spec.state or "Open"
        doc = records.QueueDoc(
            manifest=api.encode(queue), state=state, created=existing.created if existing else self.rt.now()
        )
        outcome: events.Outcome = "created" if existing is None else "unchanged" if existing == doc else "configured"
        reaction = messages.accepted(self.rt, msg, kind="Queue", name=name, outcome=outcome)
        if outcome != "unchanged":
            self.queues.put(name, doc)
            reaction.publish(subjects.queue_config(name), messages.queue_changed(self.rt, msg, name, doc))
        return reaction

    def _apply_priority_class(self, msg: events.ApplyManifest, pc: api.PriorityClass) -> Reaction:
        name = pc.metadata.name
        existing = self.classes.get(name)
        doc = records.PriorityClassDoc(manifest=api.encode(pc), value=pc.value, global_default=pc.global_default)
        reaction = messages.accepted(
            self.rt, msg, kind="PriorityClass", name=name, outcome="created" if existing is None else "configured"
        )
        self.classes.put(name, doc)
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
        domain.check_job_references(job.spec, "$.spec", self.cfg())
        existing = self._same_name_elsewhere(key, name, namespace)
        owner = next(
            (d.name for d in self.hyperjobs.values() if not d.plain and key in {r.name for r in d.children}), ""
        )
        if owner:
            raise api.ManifestError(
                "$.metadata.name", f"a job named {key!r} already exists (a child of HyperJob {owner!r})"
            )
        if existing is not None:
            if existing.manifest == api.encode(job):
                return messages.accepted(self.rt, msg, kind=kind, name=name, outcome="unchanged")
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
        reaction = messages.accepted(self.rt, msg, kind=kind, name=name, outcome="created")
        return self._submit(reaction, msg, doc)

    def _apply_podgroup(self, msg: events.ApplyManifest, podgroup: api.PodGroup) -> Reaction:
        """A PodGroup on its own (no Job): admitted and scheduled like any, with no pods."""
        name = podgroup.metadata.name
        key = domain.owner_key("PodGroup", podgroup.metadata.namespace, name)
        domain.check_podgroup_references(podgroup, self.cfg())
        existing = self._same_name_elsewhere(key, name, podgroup.metadata.namespace)
        if existing is not None:
            if existing.manifest == api.encode(podgroup):
                return messages.accepted(self.rt, msg, kind="PodGroup", name=name, outcome="unchanged")
            raise api.ManifestError("$.metadata.name", f"podgroup {name!r} already exists")
        doc = records.HyperJobDoc(
            name=key,
            manifest=api.encode(podgroup),
            created=self.rt.now(),
            plain=True,
            children=[events.ChildRef(name=key)],
        )
        reaction = messages.accepted(self.rt, msg, kind="PodGroup", name=name, outcome="created")
        return self._submit(reaction, msg, doc)

    def _apply_hyperjob(self, msg: events.ApplyManifest, hyperjob: api.HyperJob) -> Reaction:
        name, key = hyperjob.metadata.name, api.object_key(hyperjob.metadata.namespace, hyperjob.metadata.name)
        domain.check_hyperjob_references(hyperjob, self.cfg())
        previous = self.hyperjobs.get(key)
        if previous is not None and previous.plain:
            raise api.ManifestError("$.metadata.name", f"a Job named {name!r} already exists")
        if previous is not None and previous.deleting:
            raise api.ManifestError(
                "$.metadata.name", f"HyperJob {name!r} is being deleted; apply it again once it is gone"
            )
        if previous is not None and previous.manifest == api.encode(hyperjob):
            return messages.accepted(self.rt, msg, kind="HyperJob", name=name, outcome="unchanged")
        reaction = messages.accepted(
            self.rt, msg, kind="HyperJob", name=name, outcome="created" if previous is None else "configured"
        )
        stored = api.encode(hyperjob)
        self.decoded.keep(key, stored, hyperjob)
        if previous is None:
            doc = records.HyperJobDoc(name=key, manifest=stored, created=self.rt.now())
            return self._submit(reaction, msg, doc)
        doc = replace(previous, manifest=stored, generation=previous.generation + 1)
        reaction = self._submit(reaction, msg, doc)
        return self.planner.split(reaction, msg, doc) if doc.admitted else reaction

    def _same_name_elsewhere(self, key: str, name: str, namespace: str) -> records.HyperJobDoc | None:
        """The plain Job or PodGroup kept under the fleet name ``key`` (``domain.owner_key``). One
        of another namespace goes by the same name on the clusters (``team-b-x`` in ``default``
        and ``x`` in ``team-b``), so this one is refused (ADR 0010)."""
        existing = self.hyperjobs.get(key)
        if existing is not None and domain.namespace_of(existing) != namespace:
            kind = existing.manifest.get("kind", "object")
            raise api.ManifestError(
                "$.metadata.name",
                f"{namespace}/{name} goes by {key!r} on the clusters, as {kind} {domain.applied_name(existing)!r} "
                f"of namespace {domain.namespace_of(existing)!r} does (a plain Job's cluster name is "
                "<namespace>-<name> outside default)",
            )
        return existing

    def _submit(self, reaction: Reaction, cause: events.Message | str, doc: records.HyperJobDoc) -> Reaction:
        """Record the owner and ask its queue to admit it (again, for a new generation), unless no
        split could ever hold it: that is said at once, and it asks nothing of its queue (where it
        would wait as a queue limit and head a strict FIFO line) until the fleet can (``replan``)."""
        never = (
            ""
            if doc.plain or doc.admitted
            else fleetcore.inadmissible(self.state.hyperjob(doc), self.capacity.clusters)
        )
        if never:
            return self._inadmissible(reaction, cause, doc, never)
        if not doc.admitted and doc.waiting_reason.startswith(fleetcore.INADMISSIBLE):
            doc = replace(doc, waiting_reason="")
        self.state.put(doc)
        return reaction.publish(
            subjects.OWNER_SUBMITTED,
            domain.submission(
                self.rt.envelope(cause, f"submit/{doc.name}/{doc.generation}"), doc, self.cfg(), self.decoded
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

    async def replan(self) -> None:
        """Admitted HyperJobs that did not fit anywhere are planned again as capacity changes, and
        children on a lost cluster (or withdrawn for want of room) are placed again elsewhere:
        only where their gang fits, the room one move takes counted for the next (one working
        view of the fleet per round), at a bounded rate, and not at all while most clusters look
        lost at once (``fleetcore.FailoverGate``)."""
        await self.rt.ensure_fresh()
        reaction = Reaction()
        now = self.capacity.now(self.rt.now())
        alive = {n for n, c in self.capacity.clusters.items() if not fleetcore.cluster_lost(c, now)}
        paused = self.gate.paused(set(self.capacity.clusters) - alive, self.capacity.clusters)
        if paused != self.paused:
            self.paused = paused
            if paused:
                self.rt.log.warning("failovers_paused", why=paused)
            else:
                self.rt.log.info("failovers_resumed")
        working = self.room.working(now)
        for name, doc in self.hyperjobs.items():
            if not doc.admitted and not doc.deleting and doc.waiting_reason.startswith(fleetcore.INADMISSIBLE):
                self._submit(reaction, f"admissible/{name}/{doc.generation}", doc)  # the fleet may hold it now
            if doc.deleting or not doc.admitted or doc.lifecycle != "Active":
                continue
            if not doc.plain and not doc.children:
                self.planner.split(reaction, f"replan/{name}", doc)
            elif doc.manifest.get("kind") == "PodGroup":
                continue
            elif any(ref.cluster not in alive for ref in doc.children):
                if not paused:
                    self._fail_over(reaction, doc, working)  # a child on a lost cluster, or on none yet
            elif doc.waiting_reason.startswith(WAITS):
                self.state.put(replace(doc, waiting_reason=""))  # its cluster came back
        if reaction.outputs or self.rt.projection.pending:
            await self.rt.commit(replan_cause(self.rt.instance, self.rt.now(), reaction), reaction)

    def _fail_over(
        self, reaction: Reaction, doc: records.HyperJobDoc, working: dict[str, fleetcore.ClusterCapacity]
    ) -> None:
        now = self.capacity.now(self.rt.now())
        finished = [c for c, phase in doc.child_phases.items() if phase in fleetcore.TERMINAL_CHILD_PHASES]
        if doc.plain:
            child = doc.children[0]
            decisions = fleetcore.plain_failover(
                _job(doc),
                child.name,
                child.cluster,
                self.capacity.clusters,
                now,
                finished=bool(finished),
                nodes_heard=self.capacity.nodes_heard,
            )
            moving = any(isinstance(d, fleetcore.ChildMove) for d in decisions)
            if moving and not self.gate.take(self.rt.now()):
                decisions = [fleetcore.ChildWaits(child=child.name, cluster=child.cluster, reason="rate-limited")]
            split = None
        else:
            split, decisions = fleetcore.failover(
                self.state.hyperjob(doc),
                domain.split_plan(doc),
                self.capacity.clusters,
                now,
                finished=finished,
                working=working,
                may_move=lambda: self.gate.take(self.rt.now()),
                nodes_heard=self.capacity.nodes_heard,
            )
        waits = [d for d in decisions if isinstance(d, fleetcore.ChildWaits)]
        moves = [d for d in decisions if not isinstance(d, fleetcore.ChildWaits)]
        waiting = f"{WAITS} " + "; ".join(f"{d.child} on {d.cluster}: {d.reason}" for d in waits) if waits else ""
        if moves:
            moved = [m.child for m in moves if not isinstance(m, fleetcore.SetLifecycle)]
            self.rt.log.warning("children_failed_over", hyperjob=doc.name, moves=moved)
            messages.carry_out(self.rt, reaction, f"failover/{doc.name}/{now!r}", doc, moves)
            if split is not None:
                self.room.remember_moves(reaction, self.state.hyperjob(doc), split, moves)
        if split is not None:
            doc = domain.with_plan(doc, split)
        elif moves:
            move = moves[0]
            to = move.to_cluster if isinstance(move, fleetcore.ChildMove) else ""
            doc = replace(doc, children=[replace(doc.children[0], cluster=to)])
        if moves or (doc.waiting_reason != waiting and (waits or doc.waiting_reason.startswith(WAITS))):
            if waiting and waiting != doc.waiting_reason:
                self.rt.log.warning("failover_waits", hyperjob=doc.name, why=waiting)  # e.g. a hung control plane
            self.state.put(replace(doc, waiting_reason=waiting))


def replan_cause(instance: str, now: float, reaction: Reaction) -> str:
    """A re-planning round's id (``events.round_id``), from when it ran and what it decided."""
    return events.round_id(instance, "replan", now, (message.event_id for _, message in reaction.outputs))


def _job(doc: records.HyperJobDoc) -> api.Job:
    return api.expect_kind(api.decode_stored(doc.manifest), api.Job)
