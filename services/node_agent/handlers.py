"""The node-agent's work: heartbeats and telemetry for its nodes, pods started and stopped on command.

In simulate mode a pod finishes on time (its sim duration); in exec mode it runs its command as a
local process (``execpods``) and finishes when the process exits. Running pods are kept in the
store (``agentpod@<cluster>``) as well as in memory, so a simulating agent that restarts picks its
pods up again and finishes them on time; an exec agent that restarts cannot re-attach to the
processes it lost, so it kills what is left of them and reports those pods Failed (137).
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from collections import Counter

import api
import events
from events import subjects
from hwprobe.simfleet import Fault
from servicekit import Cause, Reaction, Runtime, emit
from store import Write

from . import domain, execpods
from .config import Settings, host_env
from .sensors import Sensors

PRODUCER = "node-agent"
LOST_EXIT_CODE = 137


def node_names(settings: Settings) -> list[str]:
    if settings.node_names:
        return list(settings.node_names)
    prefix = settings.node_prefix or f"{settings.cluster}-node"
    return [f"{prefix}-{i}" for i in range(settings.nodes)]


class NodeAgent:
    def __init__(self, runtime: Runtime, settings: Settings, sensors: Sensors) -> None:
        self.rt = runtime
        self.settings = settings
        self.cluster = settings.cluster
        self.kind = f"agentpod@{settings.cluster}"
        self.nodes = node_names(settings)
        self.node_set = frozenset(self.nodes)
        self.sensors = sensors
        self.allocatable = api.parse_resource_list(settings.allocatable)
        self.default_duration = api.parse_duration(settings.pod_duration)
        self.pods: dict[str, domain.RunningPod] = {}
        self.specs: dict[str, events.StartPod] = {}
        self.runner: execpods.ProcessRunner | None = None
        if settings.mode == "exec":
            self.runner = execpods.ProcessRunner(settings.cluster, settings.work_dir, settings.pod_working_dir,
                                                 host_env(), settings.kill_grace, self.on_exit)

    async def load(self) -> None:
        for name, doc in (await self.rt.store.list(self.kind)).items():
            self.pods[name] = doc.decode(domain.RunningPod)
        if self.runner is not None and self.pods:
            await self._lost_processes()

    async def _lost_processes(self) -> None:
        reports = []
        for name in sorted(self.pods):
            pod = self.pods.pop(name)
            box = execpods.sandbox(self.settings.work_dir, self.cluster, name)
            pid = (box / "pid").read_text().strip() if (box / "pid").is_file() else ""
            if pid.isdigit():
                execpods.signal_group(int(pid), signal.SIGKILL)
            reports.append(domain.Report(pod=pod.pod, uid=pod.uid, job=pod.job, node=pod.node,
                                         job_version=pod.job_version, phase="Failed", exit_code=LOST_EXIT_CODE,
                                         restarts=pod.restarts))
        cause = Cause(event_id=events.derive_id(self.cluster, "lost/" + ",".join(f"{r.pod}:{r.uid}" for r in reports)))
        await self.rt.commit(f"node-agent-{self.cluster}-lost", cause.event_id,
                             self._reaction(cause, reports, changed=[r.pod for r in reports]))

    # -- heartbeats and telemetry -------------------------------------------------------------

    async def heartbeat(self) -> None:
        now = time.time()
        await self.rt.bus.publish_many([
            (subjects.heartbeat(self.cluster, node), f"hb-{self.cluster}-{node}-{now:.3f}",
             events.encode(events.NodeHeartbeat(event_id=f"hb-{node}-{now:.3f}", occurred_at=now, producer=PRODUCER,
                                                cluster=self.cluster, node=node, allocatable=self.allocatable,
                                                labels={**self.sensors.labels(node), **self.settings.labels})))
            for node in self.nodes if not self.sensors.silent(node)])

    async def telemetry(self) -> None:
        outgoing = self.sensors.read(self.cluster, self.nodes, self.busy(), time.time())
        if outgoing:
            await self.rt.bus.publish_many(outgoing)

    def busy(self) -> dict[str, float]:
        """The fraction of each node's GPUs in use, counting one GPU per running pod (plausible, not exact)."""
        gpus = self.allocatable.get("nvidia.com/gpu", 0.0) or 1.0
        return {node: min(1.0, count / gpus) for node, count in Counter(p.node for p in self.pods.values()).items()}

    async def on_fault(self, msg: events.InjectNodeFault) -> Reaction:
        fault = Fault(kind=msg.kind, node=msg.node, gpu=msg.gpu, xid=msg.xid, device=msg.device, port=msg.port)
        self.sensors.inject(fault, time.time())
        return Reaction()

    # -- pods ---------------------------------------------------------------------------------

    async def on_start(self, msg: events.StartPod) -> Reaction:
        if msg.node not in self.node_set:
            return self._not_mine(msg)
        now = time.time()
        exec_mode = self.runner is not None
        duration = msg.sim_duration if msg.sim_duration is not None else self.default_duration
        pod = domain.RunningPod(pod=msg.pod, uid=msg.pod_uid, job=msg.job, node=msg.node, job_version=msg.job_version,
                                started_at=now, finishes_at=None if exec_mode else now + duration,
                                exit_code=msg.sim_exit_code, restart_policy=msg.restart_policy)
        previous = self.pods.get(msg.pod)
        # Decided on a copy: the pods in memory change only once the write and the report are
        # committed, so a start whose commit failed is started (and reported) again on redelivery.
        pods = dict(self.pods)
        reports = domain.start(pods, pod)
        if not exec_mode or not reports:
            return self._reaction(msg, reports, changed=[msg.pod], pods=pods).then(
                lambda: self._settle(previous, pods, msg.pod))
        if previous is not None:  # a new incarnation replaces the old one's process
            await self.runner.kill(msg.pod)  # type: ignore[union-attr]
        # Report Running before the process can end, so Running always precedes the exit.
        await self.rt.commit(f"node-agent-{self.cluster}-start", msg.event_id,
                             self._reaction(msg, reports, changed=[msg.pod], pods=pods))
        self._settle(previous, pods, msg.pod)
        self.specs[msg.pod] = msg
        await self.runner.launch(msg)  # type: ignore[union-attr]
        return Reaction()

    async def on_stop(self, msg: events.StopPod) -> Reaction:
        if msg.node not in self.node_set and msg.pod not in self.pods:
            return self._not_mine(msg)
        if self.runner is not None:
            await self.runner.kill(msg.pod)
            self.specs.pop(msg.pod, None)
        previous, pods = self.pods.get(msg.pod), dict(self.pods)
        reports = domain.stop(pods, msg.pod)
        return self._reaction(msg, reports, changed=[msg.pod], pods=pods).then(
            lambda: self._settle(previous, pods, msg.pod))

    async def _commit_until_done(self, consumer: str, cause: Cause, reaction: Reaction) -> None:
        """Commit an exit report, retrying while the store or bus is down: no redelivery would
        bring it back (the process is gone), and the deterministic id makes a retry harmless."""
        for attempt in itertools.count():
            try:
                await self.rt.commit(consumer, cause.event_id, reaction)
                return
            except Exception:  # StoreError, BusError, a version conflict: all worth another try
                self.rt.log.warning("exit_report_retry", event_id=cause.event_id, attempt=attempt, exc_info=True)
                await asyncio.sleep(min(10.0, 0.5 * 2 ** attempt))

    def _not_mine(self, msg: events.StartPod | events.StopPod) -> Reaction:
        """Another agent's node (agents of named nodes all see the cluster's pod commands)."""
        self.rt.log.debug("pod_for_another_node", pod=msg.pod, node=msg.node)
        return Reaction()

    async def on_exit(self, pod: str, uid: str, exit_code: int) -> None:
        """An exec-mode container ended by itself: report it, and restart it in place if its policy says so."""
        previous, pods = self.pods.get(pod), dict(self.pods)
        reports = domain.exited(pods, pod, uid, exit_code, time.time())
        if not reports:
            return
        report = reports[0]
        cause = Cause(event_id=events.derive_id(uid or pod, f"exit/{report.restarts}/{report.phase}/{exit_code}"))
        await self._commit_until_done(f"node-agent-{self.cluster}-exit", cause,
                                      self._reaction(cause, reports, changed=[pod], pods=pods))
        self._settle(previous, pods, pod)
        spec = self.specs.get(pod)
        if report.phase != "Running" or spec is None:
            self.specs.pop(pod, None)
            return
        await asyncio.sleep(execpods.restart_delay(report.restarts))
        current = self.pods.get(pod)
        if current is not None and current.uid == uid and self.runner is not None:
            await self.runner.launch(spec, restarts=report.restarts)

    async def advance(self) -> None:
        # Pods on a node that stopped heartbeating (an injected fault) are frozen, as if cut off.
        before = dict(self.pods)
        cut_off = {name: pod for name, pod in before.items() if self.sensors.silent(pod.node)}
        live = {name: pod for name, pod in before.items() if name not in cut_off}
        reports = domain.advance(live, time.time())
        if not reports:
            return
        # Memory changes only after the commit: if it fails, the next tick finishes them again.
        after = {**live, **cut_off}
        cause = Cause(event_id=events.derive_id(self.cluster, "advance/" + ",".join(
            f"{r.pod}:{r.uid}:{r.phase}:{r.restarts}" for r in reports)))
        await self.rt.commit(f"node-agent-{self.cluster}-clock", cause.event_id,
                             self._reaction(cause, reports, changed=[r.pod for r in reports], pods=after))
        for report in reports:
            self._settle(before.get(report.pod), after, report.pod)

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.close()

    async def guard(self) -> None:
        """Runs until the service stops, then kills every pod process (no orphans outlive the agent)."""
        try:
            await asyncio.Event().wait()
        finally:
            await self.close()

    def _settle(self, previous: domain.RunningPod | None, pods: dict[str, domain.RunningPod], name: str) -> None:
        """Keep what was committed for pod ``name``, unless another command changed it meanwhile."""
        if self.pods.get(name) is not previous:
            return
        if name in pods:
            self.pods[name] = pods[name]
        else:
            self.pods.pop(name, None)

    def _reaction(self, cause: events.Message | Cause, reports: list[domain.Report], changed: list[str],
                  pods: dict[str, domain.RunningPod] | None = None) -> Reaction:
        reaction = Reaction()
        for name in changed:
            pod = (self.pods if pods is None else pods).get(name)
            reaction.writes.append(Write.put(self.kind, name, pod) if pod else Write.delete(self.kind, name))
        for report in reports:
            reaction.publish(subjects.pod_phase(self.cluster), emit(
                events.PodPhaseReported, cause, f"report/{report.pod}/{report.phase}/{report.restarts}", PRODUCER,
                cluster=self.cluster, node=report.node, pod=report.pod, pod_uid=report.uid, job=report.job,
                job_version=report.job_version, phase=report.phase, exit_code=report.exit_code,
                restarts=report.restarts))
        return reaction


SimulatedFleet = NodeAgent  # the name the simulate-only agent had
