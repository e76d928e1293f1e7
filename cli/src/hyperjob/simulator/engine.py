"""The discrete-event loop: the services of the scenario's fleet, driven in virtual time.

At each instant ``t``: the scenario's events at ``t`` happen first (in file order), then every
message they cause is delivered until nothing is left to deliver (quiescence), then the timers due
at ``t`` fire, then the rounds due at ``t`` run in rank order if ``t`` is on the schedule grid
(the fleet's rounds, then each cluster's cycle), each followed by quiescence. Messages are
delivered in the order they were published (the oldest first, across every consumer), or, with
chaos, in an order the seeded random source picks, with crashes and duplicates mixed in
(``chaos``). The run ends at ``until``, or once nothing is scheduled and nothing has happened
for ``IDLE`` seconds; ``time`` is then the last instant at which something happened.
"""

from __future__ import annotations

import contextlib
import gc
import random
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from hyperjob import api, events
from hyperjob.bus import Bus, InMemoryBus, InstanceCrash, Member
from hyperjob.events import subjects
from hyperjob.events.subjects import STREAMS
from hyperjob.servicekit import Runtime
from hyperjob.store import InMemoryStore

from . import observe, output
from .fleet import InstancePlan, plan_instances
from .scenario import Scenario, TimedEvent
from .schema import Command
from .timing import Agenda, SimClock, SimTimers, Work

if TYPE_CHECKING:  # chaos drives the engine: it imports this module
    from .chaos import Chaos

# Without ``until``: the run ends once this long has passed with nothing scheduled or happening
# (long enough for every silence rule to play out: a cluster is lost after 30 s).
IDLE = 60.0
# Without ``until``, a run whose state keeps changing (a pod that restarts for ever) still ends:
# this much virtual time after the last scenario event.
HORIZON = 24 * 3600.0
# What a hung control plane stops (``controlPlaneHang``): its nodes' agents run on and report.
CONTROL_PLANE = frozenset({"cluster-scheduler", "job-controller"})
JOB_ACTIONS = {
    "abort": "AbortJob",
    "resume": "ResumeJob",
    "restart": "RestartJob",
    "terminate": "TerminateJob",
    "complete": "CompleteJob",
}


class Engine:
    """One run of one scenario; ``await run()`` returns the result object."""

    def __init__(self, scenario: Scenario, chaos: Chaos | None = None) -> None:
        self.scenario = scenario
        self.chaos = chaos
        self.clock = SimClock()
        self.agenda = Agenda(self.clock, scenario.period)
        self.bus = InMemoryBus(STREAMS, clock=self.clock.now, driven=True, ack_wait=0.0)
        self.store = InMemoryStore()
        self.timeline = observe.Timeline(self.clock)
        self.bus.observers.append(self.timeline.observe)
        self.bus.observers.append(self._published)
        # Members that may have something to deliver (the others certainly have not): a step
        # scans these, not every consumer of the fleet.
        self._candidates: set[Member] = set()
        self._by_stream: dict[str, list[Member]] = {}
        self._rank: dict[Member, int] = {}  # a member's place in ``bus.members`` (its tie-break)
        self.plans = {p.name: p for p in plan_instances(scenario)}
        self.runtimes: dict[str, Runtime] = {}
        self.owner: dict[int, str] = {}  # id(member) -> instance
        self.down: set[str] = set()  # clusters whose control plane is cut off
        self.hung: set[str] = set()  # clusters whose control plane hangs while their nodes run on
        self.steps = 0
        if chaos is not None:
            chaos.attach(self)

    # -- instances ---------------------------------------------------------------------------------

    async def start(self, plan: InstancePlan) -> None:
        fault = self.chaos.fault_point(plan.name) if self.chaos is not None else None
        runtime = Runtime(
            plan.service,
            plan.name,
            self.bus_for(plan),
            self.store,
            clock=self.clock,
            timers=SimTimers(self.agenda, plan.name),
            fault=fault,
            changelog=self.chaos is not None,
        )
        await plan.build(plan.settings, runtime)
        await runtime.start()
        self.runtimes[plan.name] = runtime
        for member in _members_of(runtime):
            self.owner[id(member)] = plan.name
            member.paused = self._stopped(plan)
        self._members_changed()

    def bus_for(self, plan: InstancePlan) -> Bus:
        """The bus an instance talks to: the fleet's (a test may put a view in between)."""
        return self.bus

    async def restart(self, name: str) -> None:
        """The instance died: its successor starts from what the store holds, as a new process would."""
        old = self.runtimes.pop(name)
        for member in _members_of(old):
            self.owner.pop(id(member), None)
            await member.stop()
            self.bus.forget(member)
        self.agenda.forget(name)
        self._members_changed()
        await self.start(self.plans[name])

    def _stopped(self, plan: InstancePlan) -> bool:
        """Whether an instance gets and does nothing now: its cluster is cut off, or it is part of
        a hung control plane (SIGSTOP: its messages wait, its timers do not fire)."""
        return plan.cluster in self.down or (plan.cluster in self.hung and plan.service in CONTROL_PLANE)

    def pause(self, cluster: str) -> None:
        """A cluster's control plane is cut off or hangs (or is back): its stopped instances get
        nothing and do nothing."""
        for plan in self.plans.values():
            if plan.cluster != cluster:
                continue
            paused = self._stopped(plan)
            for member in _members_of(self.runtimes[plan.name]):
                member.paused = paused
                self._candidates.add(member)
            (self.agenda.paused.add if paused else self.agenda.paused.discard)(plan.name)

    # -- the loop ----------------------------------------------------------------------------------

    async def run(self) -> output.Result:
        with _rare_collections():
            return await self._run_all()

    async def _run_all(self) -> output.Result:
        # The fleet boots one period before the scenario starts: nodes and clusters have reported,
        # and the scenario's queues and priority classes exist, when its first event happens.
        self.clock.time = -self.scenario.period
        for plan in self.plans.values():
            await self.start(plan)
        await self.seed()
        await self.settle(self.clock.time)
        self.timeline.last_activity = 0.0
        pending = list(self.scenario.events)
        until = self.scenario.until
        last_event = pending[-1].at if pending else 0.0
        limit = until if until is not None else last_event + HORIZON
        now = 0.0
        while True:
            self.clock.time = now
            self._candidates.update(m for m in self.bus.members if m.next_due() is not None)  # redeliveries due
            while pending and pending[0].at <= now + 1e-9:
                await self.apply(pending.pop(0))
                await self.quiesce()
            await self.settle(now)
            following = [
                t
                for t in (pending[0].at if pending else None, self.agenda.next_time(now), self._redelivery())
                if t is not None
            ]
            later = min(following) if following else None
            if (
                until is None
                and not pending
                and (later is None or (not self.agenda.pending_timers() and now - self.timeline.last_activity >= IDLE))
            ):
                break
            if later is None or later > limit + 1e-9:
                break
            now = later
        end = until if until is not None else self.timeline.last_activity
        self.clock.time = end
        return await observe.result(
            self.scenario.name, end, self.store, [c.name for c in self.scenario.clusters], self.timeline
        )

    async def settle(self, now: float) -> None:
        """Everything due at ``now``: timers, then the rounds on the grid, each until quiescence."""
        await self.quiesce()
        while True:
            timer = self.agenda.due_timer(now)
            if timer is not None:
                await self._run(timer[0], timer[1])
                continue
            due = self.agenda.due_round(now)
            if due is None:
                return
            self.agenda.ran(due, now)
            await self._run(due.instance, due.work)

    async def _run(self, who: str, work: Work) -> None:
        instance = who.split("/", 1)[0]
        try:
            await work()
        except InstanceCrash:
            await self.restart(instance)
        await self.quiesce()

    async def quiesce(self) -> None:
        """Deliver until no member has anything to deliver."""
        while True:
            member = self._pick()
            if member is None:
                return
            self._candidates.update(self._by_stream.get(member.stream, ()))  # they share cursors
            try:
                await member.step()
            except InstanceCrash:
                await self.restart(self.owner[id(member)])
            self.steps += 1
            if self.chaos is not None:
                await self.chaos.after_step(self)
                self._candidates.update(self.bus.members)  # a duplicate may have made any one ready

    def _pick(self) -> Member | None:
        ready = []
        for member in list(self._candidates):
            seq = member.next_ready()
            if seq is None:
                self._candidates.discard(member)
            else:
                ready.append((seq, self._rank_of(member), member))
        if not ready:
            return None
        ready.sort(key=lambda r: r[1])
        if self.chaos is not None:
            return self.chaos.pick(ready)
        return min(ready, key=lambda r: (r[0], r[1]))[2]

    def _published(self, stream: str, subject: str, data: bytes, headers: dict[str, str]) -> None:
        self._candidates.update(self._by_stream.get(stream, ()))

    def _rank_of(self, member: Member) -> int:
        """``bus.members.index(member)``, without a scan of the fleet's members at every step (members
        are only ever appended, save on a restart, which calls ``_members_changed``)."""
        rank = self._rank.get(member)
        if rank is None:
            self._rank = {m: i for i, m in enumerate(self.bus.members)}
            rank = self._rank[member]
        return rank

    def _members_changed(self) -> None:
        self._rank = {m: i for i, m in enumerate(self.bus.members)}
        self._by_stream = {}
        for member in self.bus.members:
            self._by_stream.setdefault(member.stream, []).append(member)
        self._candidates = set(self.bus.members)

    def _redelivery(self) -> float | None:
        dues = [d for m in self.bus.members if (d := m.next_due()) is not None and d > self.clock.time]
        return min(dues) if dues else None

    # -- the scenario's events -----------------------------------------------------------------------

    async def seed(self) -> None:
        """The scenario's queues and priority classes, as if applied before its first event."""
        manifests: list[api.PriorityClass | api.Queue] = [*self.scenario.priority_classes, *self.scenario.queues]
        for i, manifest in enumerate(manifests):
            self.publish(subjects.APPLY, events.ApplyManifest, f"seed/{i}", manifest=api.encode(manifest))
        await self.quiesce()

    async def apply(self, event: TimedEvent) -> None:
        body, tag = event.body, f"event/{event.seq}"
        if event.kind == "create":
            self.publish(subjects.APPLY, events.ApplyManifest, tag, manifest=self._named(body, tag))
        elif event.kind == "delete":
            self.publish(subjects.DELETE, events.DeleteObject, tag, kind=body.kind, name=body.name)
        elif event.kind in ("nodeDown", "nodeUp"):
            self.timeline.emit(
                "NodeDown" if event.kind == "nodeDown" else "NodeUp", body.node, cluster=body.cluster, node=body.node
            )
            self.publish(
                subjects.node_fault(body.cluster),
                events.InjectNodeFault,
                tag,
                cluster=body.cluster,
                node=body.node,
                kind="node-down" if event.kind == "nodeDown" else "node-up",
            )
        elif event.kind in ("clusterDown", "clusterUp"):
            going_down = event.kind == "clusterDown"
            if (body.cluster in self.down) != going_down:
                (self.down.add if going_down else self.down.discard)(body.cluster)
                self.pause(body.cluster)
                self.timeline.emit("ClusterDown" if going_down else "ClusterUp", body.cluster, cluster=body.cluster)
        elif event.kind in ("controlPlaneHang", "controlPlaneResume"):
            (self.hung.add if event.kind == "controlPlaneHang" else self.hung.discard)(body.cluster)
            self.pause(body.cluster)
        elif event.kind == "podFail":
            for cluster in self.scenario.clusters:
                self.publish(
                    subjects.node_fault(cluster.name),
                    events.InjectNodeFault,
                    f"{tag}/{cluster.name}",
                    cluster=cluster.name,
                    kind="pod-exit",
                    pod=body.pod,
                    exit_code=body.exit_code,
                )
        elif event.kind == "command":
            self._command(body, tag)

    def _named(self, manifest: api.RawDocument, tag: str) -> api.RawDocument:
        """A manifest with ``generateName`` named as the API server would, the same on every run; one
        whose prefix is unusable goes as written (and is rejected for it)."""
        try:
            return api.with_generated_name(manifest, random.Random(f"{self.scenario.name}/{tag}"))
        except api.ManifestError:
            return manifest

    def _command(self, body: Command, tag: str) -> None:
        if body.kind == "HyperJob":
            self.publish(subjects.HYPERJOB_COMMAND, events.CommandHyperJob, tag, name=body.name, action=body.action)
        else:
            action = JOB_ACTIONS.get(body.action, body.action)
            self.publish(
                subjects.OBJECT_COMMAND, events.CommandObject, tag, kind=body.kind, name=body.name, action=action
            )

    def publish(
        self,
        subject: str,
        message_type: type[events.Message],
        tag: str,
        **fields: Any,  # the message's own fields, checked by its constructor
    ) -> None:
        message = message_type(
            event_id=events.derive_id(self.scenario.name, tag),
            occurred_at=self.clock.now(),
            producer="hyperjob-simulate",
            **fields,
        )
        self.bus.publish_now(subject, events.encode(message), msg_id=message.event_id)


@contextlib.contextmanager
def _rare_collections() -> Iterator[None]:
    """Python's cycle collector, run less often while the fleet runs: a run allocates millions of
    short-lived objects over a large, long-lived state (every service's memory), and collecting
    every 700 allocations rescans that state, a tenth of a run's time. Nothing a service does
    depends on when garbage is collected."""
    thresholds = gc.get_threshold()
    gc.set_threshold(50_000, 20, 100)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def _members_of(runtime: Runtime) -> list[Member]:
    """An instance's consumers and watches: every one made by the fleet's ``InMemoryBus``."""
    members: list[Member] = []
    for member in runtime.members:
        if not isinstance(member, Member):
            raise TypeError(f"{runtime.instance}: {type(member).__name__} is not an InMemoryBus member")
        members.append(member)
    return members
