"""The node-agent's work: its nodes' status and liveness, and the pods it starts and stops.

In simulate mode a pod finishes on time (a timer at its end); in exec and container modes a
``runners.PodRunner`` runs it (a local process, ``execpods``; an OCI container, ``containerpods``)
and it finishes when that exits. Running pods are a table of the agent's own
(``agentpod@<agent>``), so a simulating agent that restarts picks its pods up again and finishes
them on time; a container-mode agent watches again the containers it left running; an exec agent
cannot re-attach to the processes it lost, so it kills what is left of them. Pods the runner did
not take back are reported Failed (137). The nodes an
injected fault took down are a table too (``agentdown@<agent>``): neither a restart nor a
redelivered fault brings a node back before its ``node-up``.

What the agent says about its nodes: a ``NodeStatus`` for each node when it changes (allocatable,
labels, readiness, the health verdict of its GPUs and fabric), and one ``AgentHeartbeat`` per
period naming the nodes that went silent. Liveness and telemetry are published directly (a lost
one is replaced by the next); pod reports go through the commit, with the pods they change.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Mapping
from typing import TypedDict

import msgspec

from hyperjob import api, events, hwprobe
from hyperjob.events import subjects
from hyperjob.events.telemetry import FabricTelemetry, GpuTelemetry
from hyperjob.hwprobe.simfleet import Fault
from hyperjob.servicekit import Reaction, Runtime, WallClock

from . import containerpods, domain, execpods, fencing
from .config import NodeSpec, Settings, host_address, host_env
from .runners import OnExit, PodRunner
from .sensors import Reading, Sensors, subject_of

LOST_EXIT_CODE = 137
RESOLVE_POLL = 0.5  # seconds between looks for the address of a pod another pod's env names
ENDED = ("Succeeded", "Failed", "Deleted")
_ADDRESS = events.decoder(events.PodAddress)


class _StatusFields(TypedDict):
    """What a node's status says besides whose it is: ``events.NodeStatus``'s fields, compared
    every period (as a tuple, in this order) and sent on change."""

    allocatable: dict[str, float]
    labels: dict[str, str]
    taints: list[dict[str, str]]
    ready: bool
    reason: str
    gpu_ok: bool
    fabric_ok: bool
    sick_gpus: list[int]
    down_ports: list[str]
    health_reasons: list[str]


def node_specs(settings: Settings) -> list[NodeSpec]:
    """The agent's nodes: as listed, or generated alike from the count (or names) and allocatable."""
    if settings.node_specs:
        return list(settings.node_specs)
    prefix = settings.node_prefix or f"{settings.cluster}-node"
    names = list(settings.node_names) or [f"{prefix}-{i}" for i in range(settings.nodes)]
    return [NodeSpec(name=n, allocatable=dict(settings.allocatable), labels=dict(settings.labels)) for n in names]


class NodeAgent:
    def __init__(self, runtime: Runtime, settings: Settings, sensors: Sensors, agent: str) -> None:
        self.rt = runtime
        self.settings = settings
        self.cluster = settings.cluster
        self.agent = agent
        self.sensors = sensors
        self.specs = {spec.name: spec for spec in node_specs(settings)}
        self.nodes = list(self.specs)
        self.allocatable = {name: api.parse_resource_list(spec.allocatable) for name, spec in self.specs.items()}
        # "never": a pod without a sim duration runs until it is stopped (the simulator's default).
        self.default_duration = None if settings.pod_duration == "never" else api.parse_duration(settings.pod_duration)
        self.pods = runtime.table(f"agentpod@{agent}", domain.RunningPod)
        self.down = runtime.table(f"agentdown@{agent}", domain.DownNode)  # taken down by an injected fault
        self.health: dict[str, hwprobe.NodeHealth] = {}
        self.reported: dict[str, tuple[object, ...]] = {}  # node -> the status last published
        self._reported_inputs: dict[str, tuple[object, ...]] = {}  # node -> what that status was made of
        self.starts: dict[str, events.PodStart] = {}  # exec/container: what to run again on a restart in place
        self.runner = pod_runner(settings, agent, self.on_exit)
        self.recovered = False  # what the agent before us left has been taken back (once a process)
        # Self-fencing (``fencing``): on the monotonic clock live, the virtual one in the simulator.
        monotonic = time.monotonic if isinstance(runtime.clock, WallClock) else runtime.now
        self.contact = fencing.Contact(monotonic, settings.fleet_lease)
        self.fencing: dict[str, str] = {}  # pod -> uid: stopped by a fence, not yet recorded Failed
        self.frozen = fencing.Frozen(settings.fleet_lease)  # standing still, waiting for the fleet's word
        self.frozen_at = 0.0  # when the last freeze was (wall clock), as the agent tells its job-controller
        # When pods last stood still (resumed from a freeze, their node back up): a simulated pod
        # due before then ends then, not at its due time (``domain.advance``).
        self.still_until = 0.0
        self.frozen_where: dict[str, tuple[str, str]] = {}  # pod -> (job, node) of what froze, until told
        self.self_fence = settings.self_fence
        # Where this agent's nodes are reached (one host); pods waiting for their peers' addresses.
        self.address = settings.node_address or host_address()
        self.resolving: dict[str, asyncio.Task[None]] = {}
        runtime.on_load(self.rearm)

    # -- status and liveness -------------------------------------------------------------------

    def status(self, node: str) -> events.NodeStatus:
        return events.NodeStatus(
            **self.rt.envelope(f"{self.cluster}/{node}", f"status/{self.rt.now()!r}"),
            cluster=self.cluster,
            node=node,
            agent=self.agent,
            address=self.address,
            **self._status_fields(node),
        )

    def _status_fields(self, node: str) -> _StatusFields:
        """What a node's status says: compared every period, sent on change."""
        spec, health = self.specs[node], self.health.get(node, hwprobe.NodeHealth())
        down = node in self.down
        return {
            "allocatable": self.allocatable[node],
            "labels": {**spec.labels, **self.sensors.labels(node)},
            "taints": list(spec.taints),
            "ready": not down,
            "reason": "NodeDown" if down else "",
            "gpu_ok": health.gpu_ok,
            "fabric_ok": health.fabric_ok,
            "sick_gpus": list(health.sick_gpus),
            "down_ports": list(health.down_ports),
            "health_reasons": list(health.reasons),
        }

    async def heartbeat(self) -> None:
        """Every period: the status of each node that changed, then one beat for the agent; an
        acknowledged beat renews the agent's contact with the bus (``fencing``)."""
        sent = self.contact.now()
        if self.self_fence and self.contact.must_fence(sent):
            await self.freeze()  # cut off longer than the lease (or stopped): freeze before renewing
        changed = []
        for node in self.nodes:
            # What a status is made of, compared first as is (cheap): the same inputs as when it
            # was last reported give the same status. The sensors' labels and the health verdicts
            # are kept objects, so an unchanged node compares by identity (5,000 nodes every beat).
            inputs = (node in self.down, self.health.get(node), self.sensors.labels(node))
            if self._reported_inputs.get(node) == inputs:
                continue
            fields = self._status_fields(node)
            key = tuple(fields.values())  # in _StatusFields' order
            if self.sensors.silent(node):
                continue
            if self.reported.get(node) != key:
                changed.append((node, key, inputs, self.status(node)))
            else:
                self._reported_inputs[node] = inputs
        await self.rt.bus.publish_many(
            [(subjects.node_status(self.cluster, n), s.event_id, events.encode(s)) for n, _, _, s in changed]
        )
        for node, key, inputs, _ in changed:
            self.reported[node] = key
            self._reported_inputs[node] = inputs
        silent = sorted(n for n in self.nodes if self.sensors.silent(n))
        beat = events.AgentHeartbeat(
            **self.rt.envelope(f"{self.cluster}/{self.agent}", f"beat/{self.rt.now()!r}"),
            cluster=self.cluster,
            agent=self.agent,
            nodes=len(self.nodes),
            silent=silent,
        )
        await self.rt.bus.publish(
            subjects.heartbeat(self.cluster, self.agent), events.encode(beat), msg_id=beat.event_id
        )
        self.contact.reached(sent)
        self.frozen.reached(sent)
        if unasked := self.frozen.unasked():
            await self._ask_about(unasked)

    async def telemetry(self) -> None:
        readings = self.sensors.read(self.cluster, self.nodes, self.busy(), self.rt.now())
        if not readings:
            return
        await self.rt.bus.publish_many([(subject_of(r), r.event_id, events.encode(r)) for r in readings])
        if self.judge(readings):
            self.rt.kick("heartbeat")

    def judge(self, readings: list[Reading]) -> bool:
        """Each node's health from its latest readings; True when any verdict changed."""
        gpus: dict[str, GpuTelemetry] = {}
        fabrics: dict[str, FabricTelemetry] = {}
        for reading in readings:
            if isinstance(reading, GpuTelemetry):
                gpus[reading.node] = reading
            else:
                fabrics[reading.node] = reading
        changed = False
        for node in dict.fromkeys(r.node for r in readings):
            health = hwprobe.node_health(gpus.get(node), fabrics.get(node))
            if health != self.health.get(node, hwprobe.NodeHealth()):
                self.rt.log.info("node_health_changed", cluster=self.cluster, node=node, reasons=health.reasons)
                changed = True
            self.health[node] = health
        return changed

    def busy(self) -> dict[str, float]:
        """The fraction of each node's GPUs in use, counting one GPU per running pod (plausible, not exact)."""
        counts = Counter(p.node for p in self.pods.values())
        return {
            node: min(1.0, count / (self.allocatable[node].get("nvidia.com/gpu", 0.0) or 1.0))
            for node, count in counts.items()
            if node in self.allocatable
        }

    # -- faults ----------------------------------------------------------------------------------

    async def on_fault(self, msg: events.InjectNodeFault) -> Reaction | None:
        if msg.kind == "pod-exit":
            pod = self.pods.get(msg.pod)
            if pod is None or not self._reachable(pod):
                return None
            pods = self._pods()
            reports = domain.exited(
                pods, msg.pod, pod.uid, msg.exit_code, self.rt.now(), next_duration=self._duration(pod)
            )
            reaction = self._reaction(msg, reports, pods)
            self._arm(self.pods.rows)
            return reaction
        if msg.node not in self.specs:
            self.rt.log.info("fault_for_another_agent", node=msg.node, kind=msg.kind)
            return None
        if msg.kind == "node-down":
            if msg.node not in self.down:
                self.down.put(msg.node, domain.DownNode(since=self.rt.now()))
        elif msg.kind == "node-up":
            if msg.node in self.down:
                self.down.delete(msg.node)
                self.still_until = self.rt.now()
                self.rearm()  # its pods' clocks run again
        else:
            fault = Fault(kind=msg.kind, node=msg.node, gpu=msg.gpu, xid=msg.xid, device=msg.device, port=msg.port)
            self.sensors.inject(fault, self.rt.now())
        self.rt.kick("heartbeat")
        return None

    def _reachable(self, pod: domain.RunningPod) -> bool:
        """A pod on a node that is down or silent is cut off: it neither finishes nor reports; a
        fenced one has stopped (it is recorded Failed, never finished or restarted); a frozen one
        stands still until it is resumed."""
        stopped = self.fencing.get(pod.pod) == pod.uid or self.frozen.holds(pod.pod, pod.uid)
        return not stopped and pod.node not in self.down and not self.sensors.silent(pod.node)

    # -- self-fencing ------------------------------------------------------------------------------

    async def check_fence(self) -> None:
        """Round (every ``FENCE_CHECK_PERIOD``, outside the runtime's lock): cut off from the bus
        longer than the lease, freeze every pod; back on the bus longer than the lease with pods
        no ``StartPods`` resumed, stop those; then record the stopped ones (retried each round
        until the store takes it; the bus gets it when it is back)."""
        if self.contact.must_fence():
            await self.freeze()
        expired = self.frozen.expire(self.contact.now())
        if expired:
            await self.fence(expired)
        if self.fencing:
            async with self.rt.lock:
                await self._record_fenced()

    async def freeze(self) -> None:
        """Freeze every pod running here now, at once, without waiting for the store or the bus
        (once per cut-off, ``Contact.must_fence``); one that cannot be frozen is fenced."""
        victims = {
            name: pod.uid
            for name, pod in self.pods.rows.items()
            if self.fencing.get(name) != pod.uid and not self.frozen.holds(name, pod.uid)
        }
        if not victims:
            return
        self.frozen.freeze(victims)
        self.frozen_at = self.rt.now()
        self.frozen_where.update({name: (row.job, row.node) for name, row in self.pods.rows.items() if name in victims})
        self.rt.log.warning("pods_frozen", cluster=self.cluster, agent=self.agent, pods=sorted(victims))
        runner = self.runner
        if runner is None:
            return  # simulated pods stand still by being frozen: they do not finish (``_reachable``)
        frozen = await asyncio.gather(*(runner.freeze(name) for name in victims))
        unfrozen = {name: uid for (name, uid), ok in zip(victims.items(), frozen, strict=True) if not ok}
        for name in unfrozen:
            self.frozen.release(name)
        if unfrozen:
            await self.fence(unfrozen)

    async def fence(self, victims: dict[str, str]) -> None:
        """Stop ``victims`` (pod -> uid) at once, without waiting for the store or the bus, to be
        recorded Failed (``Fenced``). A pod already fenced is not stopped again."""
        victims = {name: uid for name, uid in victims.items() if self.fencing.get(name) != uid}
        if not victims:
            return
        self.fencing.update(victims)
        self.rt.log.warning("pods_fenced", cluster=self.cluster, agent=self.agent, pods=sorted(victims))
        runner = self.runner
        if runner is None:
            return  # simulated pods stop by being fenced: they no longer finish (``_reachable``)
        for name in victims:
            self.starts.pop(name, None)  # never restarted in place
        # No grace: a frozen process cannot act on SIGTERM, and thawing it would let it run on.
        await asyncio.gather(*(runner.kill(name, grace=0.0) for name in victims))

    async def _ask_about(self, frozen: dict[str, str]) -> None:
        """Back on the bus: ask the job-controller which frozen pods are still the cluster's to run
        (``events.PodsFrozen``; it confirms those with a ``StartPods``, resume only)."""
        pods = [
            events.FrozenPod(pod=name, uid=uid, job=where[0], node=where[1])
            for name, uid in sorted(frozen.items())
            if (where := self.frozen_where.get(name)) is not None
        ]
        ask = events.PodsFrozen(
            **self.rt.envelope(f"{self.cluster}/{self.agent}", f"frozen/{self.frozen_at!r}"),  # one per freeze
            cluster=self.cluster,
            agent=self.agent,
            pods=pods,
            frozen_at=self.frozen_at,
        )
        await self.rt.bus.publish(subjects.pods_frozen(self.cluster), events.encode(ask), msg_id=ask.event_id)
        self.frozen.told()
        self.frozen_where = {name: where for name, where in self.frozen_where.items() if name in self.frozen.pods}
        self.rt.log.info("frozen_pods_asked_about", cluster=self.cluster, agent=self.agent, pods=len(pods))

    async def _resume(self, pods: list[str]) -> None:
        """The job-controller confirmed them: frozen pods run on from where they stood."""
        self.rt.log.info("pods_resumed", cluster=self.cluster, agent=self.agent, pods=pods)
        self.still_until = self.rt.now()
        if self.runner is not None:
            await asyncio.gather(*(self.runner.thaw(name) for name in pods))

    async def _record_fenced(self) -> None:
        """The fenced pods leave the table, reported Failed (``Fenced``), in one commit (under the lock)."""
        await self.rt.ensure_fresh()
        pods = self._pods()
        names = [n for n, uid in self.fencing.items() if n in pods and pods[n].uid == uid]
        if names:
            reports = domain.failed(pods, names, fencing.FENCE_EXIT_CODE, fencing.FENCE_REASON)
            cause = events.derive_id(self.agent, "fenced/" + ",".join(f"{r.pod}:{r.uid}" for r in reports))
            if not await self.rt.commit(cause, self._reaction(cause, reports, pods)):
                return  # refused: the tables were reloaded, the next round decides again
        self.fencing = {
            n: uid for n, uid in self.fencing.items() if n in self.pods.rows and self.pods.rows[n].uid == uid
        }

    # -- pods ------------------------------------------------------------------------------------

    async def on_start(self, msg: events.StartPods) -> Reaction | None:
        mine = [p for p in msg.pods if p.node in self.specs]
        # The same incarnation started again while it stands frozen: its job-controller read every
        # removal the fleet made before a lease that holds now, and still runs it here.
        resumed = [p.pod for p in mine if self.frozen.confirm(p.pod, p.uid)]
        # A confirmation starts nothing: a pod that is not here (it ended meanwhile) stays ended.
        mine = [] if msg.resume_only else [p for p in mine if p.pod not in resumed]
        if not mine and not resumed:
            return None
        now = self.rt.now()
        pods, reports, launch = self._pods(), [], []
        for start in mine:
            duration = start.sim_duration if start.sim_duration is not None else self.default_duration
            pod = domain.RunningPod(
                pod=start.pod,
                uid=start.uid,
                job=msg.job,
                node=start.node,
                job_version=msg.job_version,
                started_at=now,
                finishes_at=None if self.runner or duration is None else now + duration,
                exit_code=start.sim_exit_code,
                restart_policy=start.restart_policy,
            )
            previous = pods.get(start.pod)
            started = domain.start(pods, pod)
            reports += started
            if started:
                launch.append((start, previous))
        reaction = self._reaction(msg, reports, pods)
        runner = self.runner
        if runner is not None and launch:
            # Processes start once Running is committed, so Running always precedes the exit.
            reaction.after.append(lambda: self._launch(runner, launch))
        if resumed:
            reaction.after.append(lambda: self._resume(resumed))
        self._arm(pods)
        return reaction

    async def _launch(self, runner: PodRunner, launch: list[tuple[events.PodStart, domain.RunningPod | None]]) -> None:
        starts = []
        for start, previous in launch:
            if previous is not None:  # a new incarnation replaces the old one's process
                await runner.kill(start.pod)
            if self.fencing.get(start.pod) == start.uid:
                continue  # fenced between its commit and now: it must not run
            await self._publish_address(start.pod, start.uid, start.node, self.address)
            starts.append(start)
        known = await self._peer_addresses(starts)
        for start in starts:
            peers = domain.pod_hosts(start.env)
            addresses = {name: address for name, address in known[start.world_since].items() if name in peers}
            if peers <= addresses.keys():
                await self._run(runner, start, addresses)
            else:  # a peer not launched yet (another cluster's): wait for it outside the lock
                self.resolving[start.pod] = asyncio.create_task(self._run_when_resolved(runner, start, peers))

    async def _peer_addresses(self, starts: list[events.PodStart]) -> dict[float, dict[str, str]]:
        """The addresses of the peers ``starts`` name (by ``world_since``), each looked up once for
        the batch: the pods of one job name the same peers, and a world of N pods must cost an
        agent N reads, not one per pod and peer."""
        wanted: dict[float, set[str]] = {}
        for start in starts:
            wanted.setdefault(start.world_since, set()).update(domain.pod_hosts(start.env))
        return {since: await self._addresses(names, since) for since, names in wanted.items()}

    async def _run(self, runner: PodRunner, start: events.PodStart, addresses: dict[str, str]) -> None:
        """Launch the pod with the hostnames of its env resolved (``domain.resolve_hosts``)."""
        start = msgspec.structs.replace(start, env=domain.resolve_hosts(start.env, addresses, self.address))
        self.starts[start.pod] = start  # a restart in place keeps the addresses it started with
        await runner.launch(start)
        if self.frozen.holds(start.pod, start.uid):
            await runner.freeze(start.pod)  # frozen between its commit and now: it stands still

    async def _run_when_resolved(self, runner: PodRunner, start: events.PodStart, peers: set[str]) -> None:
        """Wait (at most ``resolve_wait``) until every pod ``start`` names is launched somewhere,
        then launch it, unless it was stopped or fenced meanwhile."""
        deadline = time.monotonic() + self.settings.resolve_wait
        addresses = await self._addresses(peers, start.world_since)
        while not peers <= addresses.keys() and time.monotonic() < deadline:
            await asyncio.sleep(RESOLVE_POLL)
            addresses = await self._addresses(peers, start.world_since)
        if not peers <= addresses.keys():
            self.rt.log.warning("pod_hosts_unresolved", pod=start.pod, hosts=sorted(peers - addresses.keys()))
        async with self.rt.lock:
            self.resolving.pop(start.pod, None)
            current = self.pods.get(start.pod)
            if current is None or current.uid != start.uid or self.fencing.get(start.pod) == start.uid:
                return
            await self._run(runner, start, addresses)

    async def _addresses(self, pods: set[str], world_since: float) -> dict[str, str]:
        """The node address of each of ``pods`` known now: this agent's own, else the latest
        ``podaddr.<pod>`` of the agent that launched it (any cluster). A pod whose incarnation
        ended after ``world_since`` (a peer that ran and finished before this one started) is
        known too, as "": there is nothing left to reach, and waiting for it would be in vain."""
        found = {name: self.address for name in pods if name in self.pods.rows}
        for name in sorted(pods - found.keys()):
            try:
                delivery = await self.rt.bus.last(subjects.pod_address(name))
            except Exception:  # noqa: BLE001 - the bus is away: not known yet, looked for again
                self.rt.log.warning("pod_address_unread", pod=name, exc_info=True)
                continue
            fact = None if delivery is None else _ADDRESS.decode(delivery.data)
            if not isinstance(fact, events.PodAddress):
                continue
            if fact.address:
                found[name] = fact.address
            elif world_since and fact.occurred_at >= world_since:  # ended, in this pod's world
                found[name] = ""
        return found

    async def _publish_address(self, pod: str, uid: str, node: str, address: str) -> None:
        """Say where the pod runs (``address``: "" once it ended), for the pods of any cluster
        whose env names its hostname."""
        fact = events.PodAddress(
            **self.rt.envelope(f"{self.cluster}/{pod}", f"address/{uid}/{address}"),
            pod=pod,
            uid=uid,
            cluster=self.cluster,
            node=node,
            address=address,
        )
        try:
            await self.rt.bus.publish(subjects.pod_address(pod), events.encode(fact), msg_id=fact.event_id)
        except Exception:  # noqa: BLE001 - its peers then wait for it, and at worst take loopback
            self.rt.log.warning("pod_address_unpublished", pod=pod, exc_info=True)

    async def _forget_addresses(self, ended: list[tuple[str, str, str]]) -> None:
        """An ended incarnation's address is blanked (a later job of the same name must not find
        it); one that a newer incarnation replaced stays."""
        for pod, uid, node in ended:
            try:
                delivery = await self.rt.bus.last(subjects.pod_address(pod))
                fact = None if delivery is None else _ADDRESS.decode(delivery.data)
                if isinstance(fact, events.PodAddress) and fact.uid == uid and fact.address:
                    await self._publish_address(pod, uid, node, address="")
            except Exception:  # noqa: BLE001 - left for the next incarnation to replace
                self.rt.log.warning("pod_address_kept", pod=pod, exc_info=True)

    async def on_stop(self, msg: events.StopPods) -> Reaction | None:
        mine = [p for p in msg.pods if p.node in self.specs or p.pod in self.pods]
        if not mine:
            return None
        pods = self._pods()
        reports = self._ended_before(pods, {stop.pod for stop in mine})
        for stop in mine:
            current = pods.get(stop.pod)
            if current is None and stop.node in self.specs:
                # Ended already (its exit was reported): it is gone from the node all the same,
                # and whoever stops it waits to hear so.
                reports.append(
                    domain.Report(
                        pod=stop.pod, uid=stop.uid, job=stop.job, node=stop.node, job_version=0, phase="Deleted"
                    )
                )
                continue
            if current is None or (stop.uid and current.uid != stop.uid):
                continue  # another incarnation: nothing to stop
            frozen = self.frozen.release(stop.pod)  # moved while it stood still: killed where it stands
            if self.runner is not None:
                await self.runner.kill(stop.pod, grace=0.0 if frozen else None)
                self.starts.pop(stop.pod, None)
            reports += domain.stop(pods, stop.pod)
        return self._reaction(msg, reports, pods)

    def _ended_before(self, pods: dict[str, domain.RunningPod], names: set[str]) -> list[domain.Report]:
        """Those of ``names`` that are simulated pods past their due time: they ended by themselves
        then, before whatever comes now, though the agent has not recorded it yet (its store was
        away when they came due). Finished in ``pods`` and reported so, dated at their due time."""
        now = self.rt.now()
        due = {
            name: pod
            for name in names
            if (pod := pods.get(name)) is not None
            and pod.finishes_at is not None
            and pod.finishes_at < now
            and self._reachable(pod)
        }
        reports = domain.advance(due, now, self.still_until)  # takes finished pods out of ``due``
        for report in reports:
            if report.pod in due:
                pods[report.pod] = due[report.pod]  # restarted in place
            else:
                pods.pop(report.pod, None)
        return reports

    async def finish_due(self) -> None:
        """Timer: every simulated pod whose time has come finishes (or restarts in place)."""
        await self.rt.ensure_fresh()
        pods = self._pods()
        live = {name: pod for name, pod in pods.items() if self._reachable(pod)}
        reachable = set(live)
        reports = domain.advance(live, self.rt.now(), self.still_until)  # takes finished pods out of ``live``
        if not reports:
            self._arm(pods)
            return
        after = {**{n: p for n, p in pods.items() if n not in reachable}, **live}
        cause = events.derive_id(
            self.agent, "finish/" + ",".join(f"{r.pod}:{r.uid}:{r.phase}:{r.restarts}" for r in reports)
        )
        if await self.rt.commit(cause, self._reaction(cause, reports, after)):
            self._arm(self.pods.rows)

    async def on_exit(self, pod: str, uid: str, exit_code: int, reason: str = "") -> None:
        """A pod's container (a process, an OCI container) ended by itself: report it, and restart
        it in place if its policy says so."""
        report, exited_at = None, self.rt.now()  # when it ended, however long recording it takes
        if self.fencing.get(pod) == uid:
            return  # stopped by a fence, which records it
        for attempt in itertools.count():
            # No redelivery would bring this report back (the process is gone): retry until it is in.
            try:
                async with self.rt.lock:
                    await self.rt.ensure_fresh()
                    pods = self._pods()
                    reports = domain.exited(pods, pod, uid, exit_code, exited_at, reason=reason)
                    if not reports:
                        return  # that incarnation is no longer here
                    report = reports[0]
                    cause = events.derive_id(uid or pod, f"exit/{report.restarts}/{report.phase}/{exit_code}")
                    if await self.rt.commit(cause, self._reaction(cause, reports, pods)):
                        break
            except Exception:  # noqa: BLE001 - store or bus down: wait and try again
                self.rt.log.warning("exit_report_retry", pod=pod, attempt=attempt, exc_info=True)
                await asyncio.sleep(min(10.0, 0.5 * 2 ** min(attempt, 5)))
        start = self.starts.get(pod)
        if report is None or report.phase != "Running" or start is None:
            self.starts.pop(pod, None)
            return
        await asyncio.sleep(execpods.restart_delay(report.restarts))
        current = self.pods.get(pod)
        stopped = self.fencing.get(pod) == uid or self.frozen.holds(pod, uid)
        if current is not None and current.uid == uid and self.runner is not None and not stopped:
            await self.runner.launch(start, restarts=report.restarts)

    async def recover_pods(self) -> None:
        """After a restart: the runner takes back what it can of the pods we had (a container
        still running is watched again, never started twice) and removes what belongs to no pod;
        the pods it could not take back are reported Failed — nothing watches them any more."""
        if self.runner is None or self.recovered:
            return  # (a timer: it runs under the runtime's lock)
        self.recovered = True
        await self.rt.ensure_fresh()
        adopted = await self.runner.recover(self._pods())
        self.starts.update(adopted)
        lost = {name: pod for name, pod in self._pods().items() if name not in adopted}
        if lost:
            await self._report_lost(lost)
        self.rt.log.info("pods_recovered", adopted=sorted(adopted), lost=sorted(lost))

    async def _report_lost(self, lost: dict[str, domain.RunningPod]) -> None:
        pods = self._pods()
        reports = domain.failed(pods, list(lost), LOST_EXIT_CODE, "Lost")
        cause = events.derive_id(self.agent, "lost/" + ",".join(f"{r.pod}:{r.uid}" for r in reports))
        await self.rt.commit(cause, self._reaction(cause, reports, pods))

    async def close(self) -> None:
        for task in self.resolving.values():
            task.cancel()
        if self.runner is not None:
            # A frozen pod cannot act on the SIGTERM the runner's close sends (it would wait out its
            # grace), and the agent after us would not resume it: killed here at once.
            await asyncio.gather(*(self.runner.kill(name, grace=0.0) for name in self.frozen.pods))
            await self.runner.close()

    # -- bookkeeping -------------------------------------------------------------------------------

    def _pods(self) -> dict[str, domain.RunningPod]:
        return dict(self.pods.rows)

    def _duration(self, pod: domain.RunningPod) -> float | None:
        if pod.finishes_at is None:
            return None
        return pod.finishes_at - pod.started_at

    def _reaction(
        self,
        cause: events.Message | str,
        reports: list[domain.Report],
        pods: Mapping[str, domain.RunningPod] | None = None,
    ) -> Reaction:
        """Write the pods that changed, and report them in one message."""
        if pods is not None:
            # ``pods`` is a copy of the rows with a few changed: find those by identity first (an
            # agent of thousands of pods must not compare and sort them all for every message).
            rows = self.pods.rows
            changed = [n for n, after in pods.items() if rows.get(n) is not after]
            changed += [n for n in rows if n not in pods]
            for name in sorted(changed):
                before, after = self.pods.get(name), pods.get(name)
                if after is None:
                    self.pods.delete(name)
                elif after != before:
                    self.pods.put(name, after)
        reaction = Reaction()
        ended = [(r.pod, r.uid, r.node) for r in reports if r.phase in ENDED]
        if ended and self.runner is not None:
            reaction.after.append(lambda: self._forget_addresses(ended))
        if reports:
            now = self.rt.now()
            for r in reports:  # sampled: HYPERJOB_TRACE_POD_SAMPLE
                self.rt.tracing.pod_event(f"pod {r.phase}", r.pod, r.job, node=r.node, cluster=self.cluster)
            step = "report/" + ",".join(f"{r.pod}:{r.uid}:{r.phase}:{r.restarts}" for r in reports)
            reaction.publish(
                subjects.pod_phases(self.cluster),
                events.PodPhasesReported(
                    **self.rt.envelope(cause, step),
                    cluster=self.cluster,
                    agent=self.agent,
                    reports=[
                        events.PodReport(
                            pod=r.pod,
                            uid=r.uid,
                            job=r.job,
                            node=r.node,
                            phase=r.phase,
                            exit_code=r.exit_code,
                            restarts=r.restarts,
                            reason=r.reason,
                            at=r.at or now,
                        )
                        for r in reports
                    ],
                ),
            )
        return reaction

    # -- timers ------------------------------------------------------------------------------------

    def rearm(self) -> None:
        """After a (re)load: one timer at the earliest end among the pods that are running; and,
        the first time, one to take back what a previous agent left. Armed here, not at build: a
        standby's timers that came due are dropped by the load that makes it active. A load that
        makes it active (not a reload after a failed commit) starts its contact with the bus."""
        if not self.rt.active:
            self.contact.restart()
        self._arm(self.pods.rows)
        if self.runner is not None and not self.recovered:
            self.rt.at(self.rt.now(), "recover-pods", self.recover_pods)

    def _arm(self, pods: Mapping[str, domain.RunningPod]) -> None:
        ends = [p.finishes_at for p in pods.values() if p.finishes_at is not None and self._reachable(p)]
        if ends:
            self.rt.at(min(ends), "finish", self.finish_due)
        else:
            self.rt.cancel("finish")


def pod_runner(settings: Settings, agent: str, on_exit: OnExit) -> PodRunner | None:
    """What runs the pods of ``settings.mode``; none in simulate mode (timers finish them)."""
    if settings.mode == "exec":
        return execpods.ProcessRunner(
            settings.cluster, settings.work_dir, settings.pod_working_dir, host_env(), settings.kill_grace, on_exit
        )
    if settings.mode == "container":
        return containerpods.PodmanRunner(
            settings.cluster,
            agent,
            settings.work_dir,
            settings.kill_grace,
            on_exit,
            podman=settings.podman,
            oci_runtime=settings.oci_runtime,
            nvml_gpus=hwprobe.NvmlReader().open(),
        )
    return None


SimulatedFleet = NodeAgent  # the name the simulate-only agent had
__all__ = ["LOST_EXIT_CODE", "NodeAgent", "SimulatedFleet", "node_specs"]
