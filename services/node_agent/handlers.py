"""The simulated fleet: heartbeats for every node, pods started and stopped on command, finished on time.

Running pods are kept in the store (``agentpod@<cluster>``) as well as in memory, so an agent that
restarts picks its pods up again and finishes them on time.
"""

from __future__ import annotations

import time

import api
import events
from events import subjects
from servicekit import Cause, Reaction, Runtime, emit
from store import Write

from . import domain
from .config import Settings

PRODUCER = "node-agent"


def node_names(settings: Settings) -> list[str]:
    prefix = settings.node_prefix or f"{settings.cluster}-node"
    return [f"{prefix}-{i}" for i in range(settings.nodes)]


class SimulatedFleet:
    def __init__(self, runtime: Runtime, settings: Settings) -> None:
        self.rt = runtime
        self.settings = settings
        self.cluster = settings.cluster
        self.kind = f"agentpod@{settings.cluster}"
        self.nodes = node_names(settings)
        self.allocatable = api.parse_resource_list(settings.allocatable)
        self.default_duration = api.parse_duration(settings.pod_duration)
        self.pods: dict[str, domain.RunningPod] = {}

    async def load(self) -> None:
        for name, doc in (await self.rt.store.list(self.kind)).items():
            self.pods[name] = doc.decode(domain.RunningPod)

    async def heartbeat(self) -> None:
        now = time.time()
        await self.rt.bus.publish_many([
            (subjects.heartbeat(self.cluster, node), f"hb-{self.cluster}-{node}-{now:.3f}",
             events.encode(events.NodeHeartbeat(event_id=f"hb-{node}-{now:.3f}", occurred_at=now, producer=PRODUCER,
                                                cluster=self.cluster, node=node, allocatable=self.allocatable,
                                                labels=self.settings.labels)))
            for node in self.nodes])

    async def on_start(self, msg: events.StartPod) -> Reaction:
        now = time.time()
        duration = msg.sim_duration if msg.sim_duration is not None else self.default_duration
        pod = domain.RunningPod(pod=msg.pod, uid=msg.pod_uid, job=msg.job, node=msg.node, job_version=msg.job_version,
                                started_at=now, finishes_at=now + duration, exit_code=msg.sim_exit_code,
                                restart_policy=msg.restart_policy)
        return self._reaction(msg, domain.start(self.pods, pod), changed=[msg.pod])

    async def on_stop(self, msg: events.StopPod) -> Reaction:
        return self._reaction(msg, domain.stop(self.pods, msg.pod), changed=[msg.pod])

    async def advance(self) -> None:
        reports = domain.advance(self.pods, time.time())
        if not reports:
            return
        cause = Cause(event_id=events.derive_id(self.cluster, "advance/" + ",".join(
            f"{r.pod}:{r.uid}:{r.phase}:{r.restarts}" for r in reports)))
        await self.rt.commit(f"node-agent-{self.cluster}-clock", cause.event_id,
                             self._reaction(cause, reports, changed=[r.pod for r in reports]))

    def _reaction(self, cause: events.Message | Cause, reports: list[domain.Report], changed: list[str]) -> Reaction:
        reaction = Reaction()
        for name in changed:
            pod = self.pods.get(name)
            reaction.writes.append(Write.put(self.kind, name, pod) if pod else Write.delete(self.kind, name))
        for report in reports:
            reaction.publish(subjects.pod_phase(self.cluster), emit(
                events.PodPhaseReported, cause, f"report/{report.pod}/{report.phase}/{report.restarts}", PRODUCER,
                cluster=self.cluster, node=report.node, pod=report.pod, pod_uid=report.uid, job=report.job,
                job_version=report.job_version, phase=report.phase, exit_code=report.exit_code,
                restarts=report.restarts))
        return reaction
