"""One cluster's scheduler: its view of the cluster, its cycles, and what it commits.

The view is built from latest values (node status and agents' beats, job states, queues), the
scheduler's own state from its tables (podgroup phases, reservations, queue usage) and from the
store's resource accounting (bindings). A cycle runs when something changed: housekeeping,
one Volcano session (``schedcore``), and one commit holding every binding and release of the
cycle (compare-and-set against each node's allocatable, so a second instance can never
oversubscribe a node), the podgroup phases, and the messages for the job-controller and the
global-scheduler. A summary of free capacity goes out every period.
"""

from __future__ import annotations

import itertools
import time

import msgspec

from hyperjob import api, events, fleetcore, records, schedcore
from hyperjob.events import subjects
from hyperjob.servicekit import Reaction, Runtime
from hyperjob.store import Binding, Unbind
from hyperjob.telemetry.spans import decision as decided

from . import domain, metrics
from .config import Settings
from .summary import CapacityFields, ClassCache, NodeRoom, summarize


class ClusterScheduler:
    def __init__(self, runtime: Runtime, settings: Settings) -> None:
        self.rt = runtime
        self.settings = settings
        self.cluster = settings.cluster
        conf = schedcore.parse_conf(settings.scheduler_conf) if settings.scheduler_conf else schedcore.LIVE_DEFAULT_CONF
        self.scheduler = schedcore.Scheduler(conf)
        self.period = api.parse_duration(settings.schedule_period)
        c = self.cluster
        self.phases = runtime.table(records.pgphase_kind(c), records.PodGroupPhaseDoc)
        self.reservations = runtime.table(records.reservation_kind(c), records.ReservationDoc)
        self.usage = runtime.table(records.queue_usage_kind(c), records.QueueUsageDoc)
        self.preempts = runtime.table(records.preempt_kind(c), records.PreemptOrderDoc)
        self.nodes: dict[str, domain.NodeView] = {}
        self.queues: dict[str, events.QueueChanged] = {}
        self.parts: dict[str, dict[int, events.JobState]] = {}
        self.jobs: dict[str, domain.JobView] = {}
        self.beats: dict[str, float] = {}  # agent -> when its last beat arrived (our clock)
        # A break in every beat is ours (the bus restarted, we were cut off): not the nodes' silence.
        self.hearing = fleetcore.Hearing(gap=settings.node_timeout / 2)
        # Silence counts as a node's only while the bus is fair: late beats (a server lost, a leader
        # elected) or our deafness give silent nodes longer (an agent reconnecting elsewhere).
        self.weather = fleetcore.BusWeather(settings.node_timeout)
        self.silence_limit = settings.node_timeout
        self.bound = domain.Bookings()
        self.registered: dict[str, dict[str, float]] = {}
        self.nominated: dict[str, str] = {}
        self.dirty = True
        self.revision = 0  # counts changes to what the scheduler knows (its bindings count apart)
        self._summary: tuple[tuple[int, int], CapacityFields] | None = None
        # Each node's room in the last summary, while its view, readiness and bookings are the same.
        self._rooms: dict[str, tuple[domain.NodeView, tuple[bool, int], NodeRoom]] = {}
        self._classes = ClassCache()
        self._snapshots = domain.SnapshotCache()
        self.faults: dict[str, str] = {}  # job -> the node fault that took its pods (domain.node_faults)
        runtime.on_load(self.on_loaded)

    async def on_loaded(self) -> None:
        self.bound = domain.Bookings(await self.rt.store.allocations(self.cluster))
        self._summary = None
        self._rooms = {}  # the new bookings count their revisions from 0 again
        self.registered = {}  # a store that lost its state lost the registrations too
        self.dirty = True

    def changed(self) -> None:
        self.dirty = True
        self.revision += 1
        self.rt.kick("cycle")

    # -- what the cluster says ------------------------------------------------------------------

    def on_node_status(self, msg: events.NodeStatus) -> None:
        known = self.nodes.get(msg.node)
        self.nodes[msg.node] = domain.NodeView(
            name=msg.node,
            agent=msg.agent,
            allocatable=msg.allocatable,
            labels=msg.labels,
            taints=msg.taints,
            unschedulable=msg.unschedulable,
            reported_ready=msg.ready,
            gpu_ok=msg.gpu_ok,
            fabric_ok=msg.fabric_ok,
            sick_gpus=msg.sick_gpus,
            down_ports=msg.down_ports,
            last_seen=known.last_seen if known is not None else self.rt.now(),
            stale=known.stale if known is not None else False,
        )
        if known is None or (
            known.reported_ready,
            known.allocatable,
            known.labels,
            known.taints,
            known.gpu_ok,
            known.fabric_ok,
        ) != (msg.ready, msg.allocatable, msg.labels, msg.taints, msg.gpu_ok, msg.fabric_ok):
            if known is not None and known.reported_ready != msg.ready:
                self.rt.log.info(
                    "node_readiness_changed", cluster=self.cluster, node=msg.node, ready=msg.ready, reason=msg.reason
                )
            self.changed()

    def on_heartbeat(self, msg: events.AgentHeartbeat) -> None:
        now = self.rt.now()
        if deaf := self.hearing.heard(now):
            self.weather.trouble(now)
            for node in self.nodes.values():
                node.last_seen = fleetcore.forgive(node.last_seen, deaf, now)
        self.weather.beat(msg.agent, msg.occurred_at, now)
        self.beats[msg.agent] = now
        silent = set(msg.silent)
        for node in self.nodes.values():
            if node.agent == msg.agent and node.name not in silent:
                node.last_seen = now
        limit = self.weather.limit(now)
        if limit != self.silence_limit:  # the bus turned troubled or fair again
            self.rt.log.info("node_timeout_changed", cluster=self.cluster, seconds=limit)
            self.silence_limit = limit
        stale = domain.stale_nodes(self.nodes, max(self.beats.values()), limit)
        for name, node in self.nodes.items():
            if node.stale != (name in stale):
                node.stale = name in stale
                self.rt.log.info("node_liveness_changed", cluster=self.cluster, node=name, stale=node.stale)
                self.changed()

    def on_job_state(self, msg: events.JobState) -> None:
        if msg.deleted:
            self.parts.pop(msg.job, None)
            self.jobs.pop(msg.job, None)
        else:
            parts = self.parts.setdefault(msg.job, {})
            parts[msg.part] = msg
            for stale_part in [p for p in parts if p >= msg.parts]:
                del parts[stale_part]
            view = domain.assemble(parts)
            if view is None:
                self.jobs.pop(msg.job, None)
            else:
                self.jobs[msg.job] = view
        self.changed()

    def on_queue(self, msg: events.QueueChanged) -> None:
        if msg.deleted:
            self.queues.pop(msg.name, None)
        else:
            # Read as every cycle will: a queue that cannot be read is refused here (the runtime
            # dead-letters it) instead of failing every cycle while it is the latest value.
            domain.queue_info(msg)
            self.queues[msg.name] = msg
        self.changed()

    # -- the global-scheduler's word on a gang member -----------------------------------------------

    def on_gang_control(self, msg: events.GangControl) -> Reaction | None:
        """reserve: hold the gang when it fits; start: let the held pods run; release: give them back."""
        view = self.jobs.get(msg.child)
        current = (
            domain.current_reservation(self.reservations.get(msg.child), view)
            if view is not None
            else (self.reservations.get(msg.child) or records.ReservationDoc())
        )
        if msg.attempt < current.attempt or (current.state == "Started" and msg.attempt == current.attempt):
            return None  # an older attempt's word, or already running: nothing to change
        reaction = Reaction()
        if msg.action == "release":
            view = self.jobs.get(msg.child)
            for pod in sorted(view.pods if view is not None else ()):
                if pod in self.bound:
                    reaction.unbinds.append(Unbind(self.cluster, pod))
                    del self.bound[pod]
        if msg.action == "start" and view is not None:
            # The held pods start now: their bindings are in place already.
            held = [
                events.PodRef(pod=p.name, uid=p.uid, node=self.bound[p.name].node, devices=self.bound[p.name].devices)
                for p in sorted(view.pods.values(), key=lambda p: p.name)
                if p.name in self.bound
                and p.phase == "Pending"
                and not p.node
                and self.bound[p.name].uid in ("", p.uid)
            ]
            if held:
                reaction.publish(
                    subjects.pods_bound(self.cluster), self._pods_message(events.PodsBound, msg.child, held, "bound")
                )
        state: records.ReservationState = _RESERVATION_STATES[msg.action]
        self.reservations.put(msg.child, records.ReservationDoc(state=state, attempt=msg.attempt, uid=current.uid))
        self.changed()
        return reaction

    def on_preempt_for_gang(self, msg: events.PreemptForGang) -> None:
        """The fleet's coordinated preemption (``fleetcore.plan_preemption``): the named pods are
        evicted in the first cycle that knows the gang's child here, so that cycle's session can
        enqueue the child on their room; the victims' jobs then wait (``_gate``) until the child
        holds its pods, or for one gang timeout. The order is kept (``preempt@<cluster>``) until
        then: a restart carries it out still. An older attempt's order is replaced; a redelivery
        of one already taken changes nothing."""
        known = self.preempts.get(msg.child)
        if known is None or known.order.attempt < msg.attempt:
            self.preempts.put(msg.child, records.PreemptOrderDoc(order=msg))
            self.changed()

    def _preempt(self, state: domain.ClusterView, out: domain.CycleOutcome) -> None:
        for child, doc in sorted(self.preempts.items()):
            if doc.evicted_at or child not in state.jobs:
                continue  # done, or its child is not made here yet (the room would go back to the victims)
            order = doc.order
            reason = f"preempt: for HyperJob {order.hyperjob} ({order.reason})"
            evicted = domain.evict_for_gang(self.cluster, state, order.victims, reason, out)
            decided("pods_preempted", job=child, cluster=self.cluster, pods=evicted, reason=reason)
            self.preempts.put(child, msgspec.structs.replace(doc, evicted_at=self.rt.now()))

    def _gate(self, state: domain.ClusterView) -> None:
        """Victims of a preemption make their pods again at once; those pods wait while the gang's
        child has not taken the room (at most one gang timeout), as Volcano's victims wait behind
        the preemptor it pipelined there."""
        for child, doc in sorted(self.preempts.items()):
            if not doc.evicted_at:
                continue
            expired = self.rt.now() - doc.evicted_at > fleetcore.GANG_TIMEOUT
            if domain.gate_lifted(state, child, expired):
                self.preempts.delete(child)
                continue
            for victim in doc.order.victims:
                view = state.jobs.get(victim.job)
                if view is not None:
                    waiting = {n: p for n, p in view.pods.items() if p.phase != "Pending"}
                    state.jobs[victim.job] = msgspec.structs.replace(view, pods=waiting)

    # -- the cycle ----------------------------------------------------------------------------------

    async def cycle(self) -> None:
        await self.rt.ensure_fresh()
        if not self.dirty:
            return
        self.dirty = False
        await self._register_nodes()
        state = self._view()
        out = domain.housekeeping(self.cluster, state, self._down())
        self._preempt(state, out)
        self._apply_bindings(state.bound, out)
        self._gate(state)
        started = time.perf_counter()  # for the log only: decisions read the runtime's clock
        # Live, the session runs in a worker thread: the cluster's summary and beats keep flowing
        # through a long session (a cluster silent for 30 s is declared lost and its gangs moved).
        snapshot = domain.snapshot(state, self.rt.now(), self._snapshots)
        try:
            decision = await self.rt.offloaded(self.scheduler.cycle, snapshot)
        except Exception:
            metrics.failed_session()
            raise
        state.faults = self.faults = domain.node_faults(self.faults, decision, out)
        domain.apply_decision(self.cluster, state, decision, out)
        reaction = self._reaction(state, out, decision)
        if out.binds or out.held or out.phases:
            self.rt.log.info(
                "cycle",
                cluster=self.cluster,
                seconds=round(time.perf_counter() - started, 3),
                jobs=len(state.jobs),
                binds=len(out.binds),
                held=len(out.held),
                phases=len(out.phases),
                unschedulable=len(decision.unschedulable),
                pipelined=len(decision.pipelined),
                why=dict(sorted(decision.unschedulable.items())[:2]),
            )
        self.nominated = {b.task: b.node for b in decision.pipelined}
        waiting = domain.waiting_pods(state, decision, out)
        if not (reaction.outputs or reaction.binds or reaction.unbinds or self.rt.projection.pending):
            metrics.observe_session(self.cluster, decision, waiting, time.perf_counter() - started)
            return
        self.rt.fault("mid-cycle")  # the simulator's chaos may kill the instance here: nothing is kept
        self._apply_bindings(self.bound, out)
        if await self.rt.commit(cycle_cause(self.rt.instance, self.rt.now(), reaction), reaction):
            self.dirty = True  # what this cycle did may let the next one do more
            self._observe_started(state, out)
        else:
            self.changed()
        metrics.observe_session(self.cluster, decision, waiting, time.perf_counter() - started)

    def _observe_started(self, state: domain.ClusterView, out: domain.CycleOutcome) -> None:
        """Volcano's job scheduling latency: from a job's creation to its podgroup Running."""
        for job, phase in out.phases.items():
            view = state.jobs.get(job)
            if phase == "Running" and state.phases.get(job) != "Running" and view is not None and view.created:
                metrics.E2E_JOB_SCHEDULING_LATENCY.observe(max(0.0, self.rt.now() - view.created))

    def _view(self) -> domain.ClusterView:
        incarnations = {name: view.incarnation for name, view in self.jobs.items()}
        current = {job: doc for job, doc in self.phases.items() if incarnations.get(job) == doc.incarnation}
        return domain.ClusterView(  # copies: watched values may change while a session runs
            nodes=dict(self.nodes),
            queues=dict(self.queues),
            jobs=dict(self.jobs),
            bound=dict(self.bound),
            phases={job: doc.phase for job, doc in current.items()},
            reservations=dict(self.reservations.rows),
            nominated=self.nominated,
            reasons={job: doc.reason for job, doc in current.items() if doc.reason},
        )

    def _down(self) -> set[str]:
        """Nodes whose pods are taken off: reported down, or silent while most of the cluster
        still answers (when most nodes fall silent at once, the silence is ours: evict nothing)."""
        reported = {n for n, v in self.nodes.items() if not v.reported_ready}
        stale = {n for n, v in self.nodes.items() if v.stale}
        if stale and len(stale) > self.settings.eviction_pause_share * len(self.nodes):
            self.rt.log.warning("evictions_paused", cluster=self.cluster, silent=len(stale), nodes=len(self.nodes))
            return reported
        return reported | stale

    @staticmethod
    def _apply_bindings(bound: dict[str, Binding], out: domain.CycleOutcome) -> None:
        for unbind in out.unbinds:
            bound.pop(unbind.pod, None)
        for bind in out.binds:
            bound[bind.pod] = bind

    def _reaction(self, state: domain.ClusterView, out: domain.CycleOutcome, decision: schedcore.Decision) -> Reaction:
        reaction = Reaction(binds=list(out.binds), unbinds=list(out.unbinds))
        c = self.cluster
        for job, refs in sorted(out.evicted.items()):
            reaction.publish(subjects.pods_evicted(c), self._pods_message(events.PodsEvicted, job, refs, "evicted"))
        for job, refs in sorted(out.rejected.items()):
            reaction.publish(subjects.pods_rejected(c), self._pods_message(events.PodsRejected, job, refs, "rejected"))
        for job, refs in sorted(out.bound.items()):
            nodes = len({r.node for r in refs})
            with self.rt.span("bind gang", job, job=job, cluster=c, pods=len(refs), nodes=nodes):
                decided("gang_bound", job=job, cluster=c, pods=len(refs), nodes=nodes, reason="gang fits")
                reaction.publish(subjects.pods_bound(c), self._pods_message(events.PodsBound, job, refs, "bound"))
        for job in out.held:
            reaction.publish(subjects.RESERVATION_HELD, self._held(job, state, held=True))
        for job in out.lost:
            reaction.publish(subjects.RESERVATION_HELD, self._held(job, state, held=False))
        for job, phase in sorted(out.phases.items()):
            reason = out.reasons.get(job, "")
            with self.rt.span("podgroup phase", job, job=job, cluster=c, phase=phase):
                decided("podgroup_phase_changed", job=job, cluster=c, phase=phase, reason=reason)
                reaction.publish(subjects.podgroup_phase(c), self._phase(job, phase, reason))
        self._forget_gone_jobs()
        self._record_usage(decision)
        return reaction

    def _pods_message(
        self,
        kind: type[events.PodsBound] | type[events.PodsEvicted] | type[events.PodsRejected],
        job: str,
        refs: list[events.PodRef],
        what: str,
    ) -> events.Message:
        uid = self.jobs[job].uid if job in self.jobs else job
        step = f"{what}/" + ",".join(f"{r.pod}:{r.uid}:{r.node}:{r.reason}" for r in refs)
        return kind(**self.rt.envelope(f"{self.cluster}/{uid}", step), cluster=self.cluster, job=job, pods=refs)

    def _held(self, job: str, state: domain.ClusterView, held: bool) -> events.ReservationHeld:
        view = self.jobs[job]
        reservation = state.reservation(job) or records.ReservationDoc()
        version = self.reservations.versions.get(job, 0) + 1
        self.reservations.put(
            job,
            records.ReservationDoc(state="Held" if held else "Reserving", attempt=reservation.attempt, uid=view.uid),
        )
        return events.ReservationHeld(
            **self.rt.envelope(f"{self.cluster}/{view.uid}", f"held/{reservation.attempt}/{held}/{version}"),
            cluster=self.cluster,
            child=job,
            hyperjob=view.gang,
            attempt=reservation.attempt,
            held=held,
        )

    def _phase(self, job: str, phase: str, reason: str) -> events.PodGroupPhaseChanged:
        """The podgroup's phase and, while it waits, its Unschedulable condition's message."""
        view = self.jobs[job]
        version = self.phases.versions.get(job, 0) + 1
        self.phases.put(job, records.PodGroupPhaseDoc(phase=phase, reason=reason, incarnation=view.incarnation))
        return events.PodGroupPhaseChanged(
            **self.rt.envelope(f"{self.cluster}/{job}/{view.incarnation}", f"phase/{phase}/{version}"),
            cluster=self.cluster,
            job=job,
            job_uid=view.uid,
            job_version=view.version,
            phase=phase,
            reason=reason,
        )

    def _forget_gone_jobs(self) -> None:
        self.faults = {job: why for job, why in self.faults.items() if job in self.jobs}
        for table in (self.phases, self.reservations):
            for job in [j for j in table if j not in self.jobs]:
                table.delete(job)

    def _record_usage(self, decision: schedcore.Decision) -> None:
        for queue, usage in sorted(decision.queues.items()):
            doc = records.QueueUsageDoc(allocated=dict(usage.allocated), deserved=dict(usage.deserved))
            if self.usage.get(queue) != doc:
                self.usage.put(queue, doc)

    async def _register_nodes(self) -> None:
        """Nodes the store's accounting does not know (or knows another size of) get registered
        before a session may bind to them."""
        new = {n: dict(v.allocatable) for n, v in sorted(self.nodes.items()) if self.registered.get(n) != v.allocatable}
        if new:
            await self.rt.store.set_nodes_allocatable(self.cluster, new)  # one round trip for them all
            self.registered.update(new)

    # -- the summary ----------------------------------------------------------------------------------

    async def report_capacity(self) -> None:
        """Every period, changed or not: the global scheduler judges a cluster alive by them."""
        revision = (self.revision, self.bound.revision)
        if self._summary is None or self._summary[0] != revision:
            self._summary = (revision, self._summarize())
        fields = self._summary[1]
        message = events.ClusterCapacityReported(
            **self.rt.envelope(self.cluster, f"capacity/{self.rt.now()!r}"), **fields
        )
        await self.rt.bus.publish(subjects.capacity(self.cluster), events.encode(message), msg_id=message.event_id)

    def _summarize(self) -> CapacityFields:
        rooms = [self._room(n) for _, n in sorted(self.nodes.items())]
        if len(self._rooms) > len(self.nodes):  # nodes that left
            self._rooms = {n: r for n, r in self._rooms.items() if n in self.nodes}
        settings = self.settings
        return summarize(
            self.cluster,
            settings.labels,
            rooms,
            len(self.nodes),
            settings.links,
            settings.prices,
            settings.data_sets,
            settings.data_links,
            self._classes,
        )

    def _room(self, n: domain.NodeView) -> NodeRoom:
        """The node as the summary sees it; rebuilt only when the node or its bookings changed
        (a ``NodeView`` is replaced on every change but its liveness, which is in the key)."""
        key = (n.ready, self.bound.node_revision.get(n.name, 0))
        cached = self._rooms.get(n.name)
        if cached is not None and cached[0] is n and cached[1] == key:
            return cached[2]
        used = self.bound.used
        room = NodeRoom(
            name=n.name,
            allocatable=n.allocatable,
            free={r: a - used.get(n.name, {}).get(r, 0.0) for r, a in _with_pods(n.allocatable).items()},
            labels=n.labels,
            taints=n.all_taints(),
            schedulable=n.ready and not n.unschedulable,
        )
        self._rooms[n.name] = (n, key, room)
        return room


def _with_pods(allocatable: dict[str, float]) -> dict[str, float]:
    return allocatable if "pods" in allocatable else {**allocatable, "pods": domain.DEFAULT_PODS}


def cycle_cause(instance: str, now: float, reaction: Reaction) -> str:
    """A cycle's id (``events.round_id``), from when it ran and what it decided: its messages,
    and the pods it binds and unbinds."""
    binds = (f"+{b.pod}@{b.node}:{b.uid}" for b in reaction.binds)
    unbinds = (f"-{u.pod}" for u in reaction.unbinds)
    decided = itertools.chain((m.event_id for _, m in reaction.outputs), binds, unbinds)
    return events.round_id(instance, "cycle", now, decided)


# What a gang-control action makes of the member's reservation.
_RESERVATION_STATES: dict[str, records.ReservationState] = {
    "reserve": "Reserving",
    "start": "Started",
    "release": "Released",
}
