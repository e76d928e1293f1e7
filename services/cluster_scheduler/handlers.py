"""One scheduling cycle of one cluster, and what it writes and announces."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

import msgspec

import api
import events
import hwprobe
import records
import schedcore
from events import derive_id, subjects
from events.telemetry import FabricTelemetry, GpuTelemetry
from jobcore import model as jm
from servicekit import Runtime
from store import Binding

from . import domain
from .summary import summarize
from .config import Settings

PRODUCER = "cluster-scheduler"


class ClusterScheduler:
    def __init__(self, runtime: Runtime, settings: Settings) -> None:
        self.rt = runtime
        self.settings = settings
        self.cluster = settings.cluster
        conf = schedcore.parse_conf(settings.scheduler_conf) if settings.scheduler_conf else schedcore.DEFAULT_CONF
        self.scheduler = schedcore.Scheduler(conf)
        self.period = api.parse_duration(settings.schedule_period)
        self.wake = asyncio.Event()
        self.nominated: dict[str, str] = {}
        self._registered: dict[str, records.NodeDoc] = {}
        self.health: dict[str, hwprobe.NodeHealth] = {}
        self._health_read_at = float("-inf")

    async def on_pods_ready(self, msg: events.PodsReady) -> None:
        self.wake.set()

    async def run_cycles(self) -> None:
        """Cycle every schedule period, or sooner when new work arrives."""
        while True:
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=self.period)
            except TimeoutError:
                pass
            self.wake.clear()
            try:
                await self.cycle()
            except Exception:  # one failed cycle must not stop scheduling
                self.rt.log.exception("cycle_failed", cluster=self.cluster)

    async def cycle(self) -> schedcore.Decision:
        now = time.time()
        state = await self._load(now)
        await self._return_resources(state)
        decision = self.scheduler.cycle(domain.snapshot(state, now))
        await self._carry_out(state, decision)
        await self._report_capacity(state, now)
        return decision

    # -- reading ----------------------------------------------------------------------------------

    async def _load(self, now: float) -> domain.ClusterState:
        store, c = self.rt.store, self.cluster
        podgroups = {n: d.decode(jm.PodGroupInfo) for n, d in (await store.list(records.podgroup_kind(c))).items()}
        jobs = {n: d.decode(jm.JobRecord) for n, d in (await store.list(records.job_kind(c))).items()}
        phase_docs = {n: d.decode(records.PodGroupPhaseDoc) for n, d in (await store.list(records.pgphase_kind(c))).items()}
        return domain.ClusterState(
            nodes=await self._nodes(now),
            queues={n: d.decode(records.QueueDoc) for n, d in (await store.list(records.QUEUE)).items()},
            podgroups=podgroups, jobs=jobs,
            phases=domain.current_phases(phase_docs, jobs), stale_phases=sorted(set(phase_docs) - set(jobs)),
            bound={pod: b.node for pod, b in (await store.allocations(c)).items()},
            nominated=self.nominated,
            gates={n: d.decode(records.GateDoc) for n, d in (await store.list(records.gate_kind(c))).items()},
            reservations={n: d.decode(records.ReservationDoc)
                          for n, d in (await store.list(records.reservation_kind(c))).items()})

    async def _nodes(self, now: float) -> dict[str, records.NodeDoc]:
        """Nodes as their latest heartbeats describe them, tainted by their health; a changed node is
        registered and recorded."""
        beats = await self.rt.bus.last_per_subject(f"heartbeat.node.{self.cluster}.>")
        await self._read_health(now)
        nodes = {}
        for delivery in beats.values():
            beat = msgspec.json.decode(delivery.data, type=events.NodeHeartbeat)
            health = self.health.get(beat.node)
            taints = beat.taints + domain.health_taints(health) if health is not None else beat.taints
            nodes[beat.node] = records.NodeDoc(
                name=beat.node, allocatable=beat.allocatable, labels=beat.labels, taints=taints,
                unschedulable=beat.unschedulable, ready=now - beat.occurred_at <= self.settings.node_timeout,
                last_heartbeat=beat.occurred_at)
        for name, node in nodes.items():
            await self._register(node)
        return nodes

    async def _read_health(self, now: float) -> None:
        """Every health period, each node's health from its latest GPU and fabric telemetry."""
        if self.settings.health_period <= 0 or now - self._health_read_at < self.settings.health_period:
            return
        self._health_read_at = now
        gpu: dict[str, GpuTelemetry] = {}
        fabric: dict[str, FabricTelemetry] = {}
        fresh = now - self.settings.telemetry_max_age
        for delivery in (await self.rt.bus.last_per_subject(subjects.telemetry_of(self.cluster))).values():
            if delivery.subject.startswith("telemetry.gpu."):
                message = msgspec.json.decode(delivery.data, type=GpuTelemetry)
                if message.occurred_at >= fresh:
                    gpu[message.node] = message
            elif delivery.subject.startswith("telemetry.fabric."):
                fabric_message = msgspec.json.decode(delivery.data, type=FabricTelemetry)
                if fabric_message.occurred_at >= fresh:
                    fabric[fabric_message.node] = fabric_message
        health = {node: hwprobe.node_health(gpu.get(node), fabric.get(node)) for node in sorted({*gpu, *fabric})}
        for node, now_health in health.items():
            if now_health != self.health.get(node, hwprobe.NodeHealth()):
                self.rt.log.info("node_health_changed", cluster=self.cluster, node=node,
                                 healthy=now_health.gpu_ok and now_health.fabric_ok, reasons=now_health.reasons)
        self.health = health

    async def _register(self, node: records.NodeDoc) -> None:
        known = self._registered.get(node.name)
        if known is not None and (known.allocatable, known.ready, known.labels, known.taints) == (
                node.allocatable, node.ready, node.labels, node.taints):
            return
        if known is None or known.allocatable != node.allocatable:
            await self.rt.store.set_node_allocatable(self.cluster, node.name, node.allocatable)
        await self.rt.store.put_if_version(records.node_kind(self.cluster), node.name, node, None)
        self._registered[node.name] = node

    # -- writing ----------------------------------------------------------------------------------

    async def _return_resources(self, state: domain.ClusterState) -> None:
        for job in sorted(set(state.reservations) - set(state.jobs)):
            await self.rt.store.delete(records.reservation_kind(self.cluster), job)  # the job is gone
            del state.reservations[job]
        for job in state.stale_phases:
            # The job is gone: forget its podgroup's phase, or the documents would pile up for ever.
            await self.rt.store.delete(records.pgphase_kind(self.cluster), job)
        done = domain.finished_or_gone(state)
        if done:
            await self.rt.store.release_many(self.cluster, done)
            for pod in done:
                state.bound.pop(pod, None)
        lost = domain.lost_on_down_nodes(state)
        if lost:
            await self.rt.store.release_many(self.cluster, [pod for pod, _ in lost])
            await self.rt.bus.publish_many([self._evicted(state, pod, node, "nodeDown") for pod, node in lost])
            for pod, _ in lost:
                state.bound.pop(pod, None)

    async def _carry_out(self, state: domain.ClusterState, decision: schedcore.Decision) -> None:
        outgoing: list[tuple[str, str, bytes]] = []
        for evict in decision.evictions:
            if await self.rt.store.release(self.cluster, evict.task):
                outgoing.append(self._evicted(state, evict.task, evict.node, evict.reason))
        self.nominated = {b.task: b.node for b in decision.pipelined}
        for job, binds in _by_job(decision.binds).items():
            outgoing += await self._bind(state, job, binds)
        outgoing += self._rebind_announcements(state)
        outgoing += await self._phases(state, decision.podgroup_phases)
        if outgoing:
            await self.rt.bus.publish_many(outgoing)

    async def _bind(self, state: domain.ClusterState, job: str, binds: list[schedcore.Bind]) -> list[Any]:
        record = state.jobs[job]
        reservation = state.reservation(job)
        if reservation is not None and reservation.state != "Reserving" and reservation.state != "Started":
            return []  # held already, or given back until the global-scheduler asks again
        gang = [Binding(b.task, b.node, dict(record.pods[b.task].scheduling.request)) for b in binds]
        result = await self.rt.store.bind_gang(self.cluster, gang)
        if not result.ok:
            self.rt.log.info("gang_bind_refused", job=job, node=result.failed_node, missing=result.missing,
                             pod=result.failed_pod)
            return []
        for b in binds:
            state.bound[b.task] = b.node
        if reservation is not None and reservation.state == "Reserving":
            return [await self._held(state, job, reservation)]
        return [self._bound(record, b.task, b.node) for b in binds]

    async def _held(self, state: domain.ClusterState, job: str, reservation: records.ReservationDoc) -> Any:
        """A gang member's pods now hold their nodes: tell the global-scheduler, start nothing."""
        held = records.ReservationDoc(state="Held", attempt=reservation.attempt)
        await self.rt.store.put_if_version(records.reservation_kind(self.cluster), job, held, None)
        state.reservations[job] = held
        message = events.ReservationHeld(
            event_id=derive_id(f"{self.cluster}/{state.jobs[job].uid}", f"held/{reservation.attempt}"),
            occurred_at=time.time(), producer=PRODUCER, cluster=self.cluster, child=job,
            hyperjob=state.gates[job].gang, attempt=reservation.attempt)
        return subjects.RESERVATION_HELD, message.event_id, events.encode(message)

    async def on_gang_control(self, msg: events.GangControl) -> None:
        """reserve: hold the gang when it fits; start: let the held pods run; release: give them back."""
        kind = records.reservation_kind(self.cluster)
        stored = await self.rt.store.get(kind, msg.child)
        current = stored.decode(records.ReservationDoc) if stored else records.ReservationDoc()
        if msg.attempt < current.attempt or current.state == "Started":
            return  # an older attempt's word, or already running: nothing to change
        if msg.action == "release":
            record_doc = await self.rt.store.get(records.job_kind(self.cluster), msg.child)
            pods = list(record_doc.decode(jm.JobRecord).pods) if record_doc else []
            await self.rt.store.release_many(self.cluster, pods)
        state = {"reserve": "Reserving", "start": "Started", "release": "Released"}[msg.action]
        await self.rt.store.put_if_version(kind, msg.child, records.ReservationDoc(state=state, attempt=msg.attempt),
                                           stored.version if stored else 0)
        self.wake.set()

    def _rebind_announcements(self, state: domain.ClusterState) -> list[Any]:
        """Bound here but the job-controller has not heard it (a crash between bind and publish):
        announce again; the deterministic id makes a repeat harmless."""
        return [self._bound(state.jobs[job], pod.name, state.bound[pod.name])
                for job in sorted(state.jobs) if _may_start(state, job) for pod in state.jobs[job].pods.values()
                if pod.phase == "Pending" and pod.node is None and pod.name in state.bound]

    async def _phases(self, state: domain.ClusterState, phases: dict[str, str]) -> list[Any]:
        out = []
        for job, phase in sorted(phases.items()):
            if job not in state.podgroups or state.phases.get(job, "Pending") == phase:
                continue
            doc = records.PodGroupPhaseDoc(phase=phase, incarnation=domain.incarnation(state.jobs[job]))
            version = await self.rt.store.put_if_version(records.pgphase_kind(self.cluster), job, doc, None)
            message = events.PodGroupPhaseChanged(
                event_id=derive_id(f"{self.cluster}/{job}/{state.jobs[job].uid}", f"phase/{version}"),
                occurred_at=time.time(), producer=PRODUCER, cluster=self.cluster, job=job, phase=phase)
            out.append((subjects.podgroup_phase(self.cluster), message.event_id, events.encode(message)))
        return out

    def _bound(self, record: jm.JobRecord, pod: str, node: str) -> tuple[str, str, bytes]:
        p = record.pods[pod]
        message = events.PodBound(event_id=derive_id(p.uid, f"bound/{node}"), occurred_at=time.time(),
                                  producer=PRODUCER, cluster=self.cluster, job=record.name, pod=pod, node=node,
                                  job_version=p.version, pod_uid=p.uid)
        return subjects.pod_bound(self.cluster), message.event_id, events.encode(message)

    def _evicted(self, state: domain.ClusterState, pod: str, node: str, reason: str) -> tuple[str, str, bytes]:
        record = next((r for r in state.jobs.values() if pod in r.pods), None)
        p = record.pods[pod] if record is not None else None
        uid = p.uid if p is not None else f"{self.cluster}/{pod}"
        message = events.PodEvicted(event_id=derive_id(uid, f"evicted/{reason}"), occurred_at=time.time(),
                                    producer=PRODUCER, cluster=self.cluster, job=record.name if record else "",
                                    pod=pod, node=node, reason=reason, job_version=p.version if p else 0,
                                    pod_uid=p.uid if p else "")
        return subjects.pod_evicted(self.cluster), message.event_id, events.encode(message)

    async def _report_capacity(self, state: domain.ClusterState, now: float) -> None:
        used = {name: usage.used for name, usage in (await self.rt.store.nodes(self.cluster)).items()}
        summary = summarize(self.cluster, self.settings.labels, state.nodes, used, now, self.settings.links)
        await self.rt.store.put_if_version(records.CLUSTER, self.cluster, summary, None)
        message = events.ClusterCapacityReported(
            event_id=derive_id(self.cluster, f"capacity/{now}"), occurred_at=now, producer=PRODUCER,
            cluster=self.cluster, labels=summary.labels, allocatable=summary.allocatable, free=summary.free,
            nodes=summary.nodes, ready_nodes=summary.ready_nodes, largest_node_free=summary.largest_node_free,
            free_accelerators=summary.free_accelerators, gangs=summary.gangs,
            gpu_healthy_nodes=summary.gpu_healthy_nodes, fabric_healthy_nodes=summary.fabric_healthy_nodes)
        await self.rt.bus.publish(subjects.capacity(self.cluster), events.encode(message), msg_id=message.event_id)


def _may_start(state: domain.ClusterState, job: str) -> bool:
    """Bound pods of a gang member start only once the whole cross-cluster gang holds."""
    reservation = state.reservation(job)
    return reservation is None or reservation.state == "Started"


def _by_job(binds: list[schedcore.Bind]) -> dict[str, list[schedcore.Bind]]:
    grouped: defaultdict[str, list[schedcore.Bind]] = defaultdict(list)
    for bind in binds:
        grouped[bind.job].append(bind)
    return dict(grouped)
