"""Deterministic fault injection: ``hyperjob simulate FILE --chaos SEED`` (ADR 0004 §5).

The technique FoundationDB and TigerBeetle use: run the real handlers under a seeded random
source that crashes service instances at the points where a real process can die, redelivers,
duplicates and reorders messages across subjects, and wipes an instance's state so it is rebuilt
from its changelog; check the system's invariants after every step; and replay any run exactly
from its seed. Every choice comes from ``random.Random(seed)`` and the engine's own deterministic
order, so the same seed gives the same run, step for step.

Faults (each a seeded coin flip):

- **crash** at a fault point of the runtime: ``after-commit`` (the store has the effects, nothing
  is published), ``after-publish`` (published, not acked), and the cluster-scheduler's
  ``mid-cycle`` (decided, not committed). The engine restarts the instance from the store; the
  unacked batch comes back.
- **reorder**: the next delivery goes to a random ready consumer instead of the oldest message
  (each consumer still gets its own messages in stream order, as JetStream guarantees).
- **duplicate**: a message a consumer already acked is delivered to it again.
- **rebuild**: an instance's documents are wiped and rebuilt from its changelog
  (``hyperjob admin rebuild``), between two steps.

Invariants, checked after every step (the first one broken raises ``Violation`` with the seed,
the virtual time and the step):

- no node's bound requests exceed its allocatable;
- no pod incarnation is bound to two nodes, and no pod name runs twice at once in a cluster;
- no pod of a child runs in two clusters at once (fencing, issue 33: a child moves only once its
  old cluster surely stopped it; a cluster cut off whole, ``clusterDown``, runs nothing meanwhile);
- no pod of a cross-cluster gang is bound before the global-scheduler told its cluster to start;
- nothing is dead-lettered;

and at the end of the run: every Job and HyperJob ends in the phase it ends in without chaos.
Rebuilds are not drawn while a cluster is cut off (its instances could not be reached).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from hyperjob import events
from hyperjob.bus import H_ERROR, H_ORIGINAL_SUBJECT, InstanceCrash, Member

from . import output

if TYPE_CHECKING:
    from .engine import Engine
    from .scenario import Scenario

_DECODER = events.decoder(
    events.PodsBound, events.PodsEvicted, events.PodPhasesReported, events.DispatchChild, events.GangControl
)
_WATCHED = ("sched.pods.", "node.pods.", "sched.child.dispatch.", "sched.gang.control.")
TOLERANCE = 1e-6


@dataclass(frozen=True)
class Rates:
    """How often each fault is drawn: per fault point reached (crash) or per step."""

    crash: float = 0.02
    reorder: float = 0.25
    duplicate: float = 0.05
    rebuild: float = 0.005


class Violation(Exception):
    """An invariant broke: where (seed, virtual time, step) and what."""

    def __init__(self, seed: int, time: float, step: int, what: str) -> None:
        super().__init__(f"chaos seed {seed}, t={time:g}s, step {step}: {what}")
        self.seed, self.time, self.step, self.what = seed, time, step, what


@dataclass
class Invariants:
    """What the bus has shown so far, to judge the invariants by."""

    bound_to: dict[tuple[str, str], str] = field(default_factory=dict)  # (cluster, uid) -> node
    running: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (cluster, pod) -> uids running
    gang_of: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)  # (cluster, child) -> attempt
    started: set[tuple[str, str, int]] = field(default_factory=set)  # (cluster, child, attempt) told to start
    broken: list[str] = field(default_factory=list)
    # Clusters cut off whole (``clusterDown``): frozen in virtual time, their pods do not run meanwhile.
    frozen: Callable[[], Collection[str]] = lambda: ()
    clusters: set[str] = field(default_factory=set)  # clusters whose pods have reported

    def observe(self, stream: str, subject: str, data: bytes, headers: dict[str, str]) -> None:
        if stream == "DLQ":
            self.broken.append(
                f"dead-lettered: {headers.get(H_ORIGINAL_SUBJECT, subject)} ({headers.get(H_ERROR, '')})"
            )
            return
        if not subject.startswith(_WATCHED):
            return
        try:
            message = _DECODER.decode(data)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return
        if isinstance(message, events.DispatchChild):
            self._dispatched(message)
        elif isinstance(message, events.GangControl) and message.action == "start":
            self.started.add((message.cluster, message.child, message.attempt))
        elif isinstance(message, events.PodsBound):
            self._bound(message)
        elif isinstance(message, events.PodsEvicted):
            for ref in message.pods:
                self.running.get((message.cluster, ref.pod), set()).discard(ref.uid)
        elif isinstance(message, events.PodPhasesReported):
            self._reported(message)

    def _dispatched(self, m: events.DispatchChild) -> None:
        if m.gang:
            self.gang_of[(m.cluster, m.child)] = (m.gang, m.gang_attempt)
        else:
            self.gang_of.pop((m.cluster, m.child), None)

    def _bound(self, m: events.PodsBound) -> None:
        gang = self.gang_of.get((m.cluster, m.job))
        if gang is not None and (m.cluster, m.job, gang[1]) not in self.started:
            self.broken.append(f"{m.job} in {m.cluster} bound before its gang {gang[0]} (attempt {gang[1]}) started")
        for ref in m.pods:
            node = self.bound_to.setdefault((m.cluster, ref.uid), ref.node)
            if node != ref.node:
                self.broken.append(f"pod {ref.pod} ({ref.uid}) in {m.cluster} bound to {node} and {ref.node}")

    def _reported(self, m: events.PodPhasesReported) -> None:
        self.clusters.add(m.cluster)
        for r in m.reports:
            uids = self.running.setdefault((m.cluster, r.pod), set())
            if r.phase == "Running":
                others = uids - {r.uid}
                if others:
                    self.broken.append(
                        f"pod {r.pod} in {m.cluster} runs twice: {r.uid} on {r.node} while {sorted(others)} still runs"
                    )
                elsewhere = self._running_elsewhere(m.cluster, r.pod)
                if elsewhere:
                    self.broken.append(f"pod {r.pod} runs in {m.cluster} and in {elsewhere} at once")
                uids.add(r.uid)
            else:
                uids.discard(r.uid)

    def _running_elsewhere(self, cluster: str, pod: str) -> str:
        """Another cluster (not frozen) where a pod of that name runs now, or ''."""
        frozen = self.frozen()
        return next(
            (c for c in sorted(self.clusters) if c != cluster and c not in frozen and self.running.get((c, pod))), ""
        )


class Chaos:
    """The seeded source of faults for one run, and its invariant checks. The engine calls
    ``attach`` once, ``fault_point`` per instance it starts, ``pick`` to choose each delivery and
    ``after_step`` after each."""

    def __init__(self, seed: int, rates: Rates = Rates()) -> None:
        self.seed = seed
        self.rates = rates
        self.rng = random.Random(seed)
        self.injected: Counter[str] = Counter()
        self.trace: list[tuple[float, int, str]] = []  # (virtual time, step, fault) of crashes and rebuilds
        self.invariants = Invariants()
        self._engine: Engine | None = None
        self._checked_bindings = -1

    def attach(self, engine: Engine) -> None:
        self._engine = engine
        self.invariants.frozen = lambda: engine.down
        engine.bus.observers.append(self.invariants.observe)

    # -- faults --------------------------------------------------------------------------------

    def fault_point(self, instance: str) -> Callable[[str], None]:
        def fault(point: str) -> None:
            if self.rng.random() < self.rates.crash:
                self._note(f"crash {point}", f"{instance} crashes {point}")
                raise InstanceCrash(f"{instance} at {point}")

        return fault

    def pick(self, ready: list[tuple[int, int, Member]]) -> Member:
        oldest = min(ready, key=lambda r: (r[0], r[1]))
        if len(ready) > 1 and self.rng.random() < self.rates.reorder:
            chosen = ready[self.rng.randrange(len(ready))]
            if chosen is not oldest:
                self.injected["reorder"] += 1
            return chosen[2]
        return oldest[2]

    async def after_step(self, engine: Engine) -> None:
        await self.check(engine)
        if self.rng.random() < self.rates.duplicate:
            self._duplicate(engine)
        if self.rng.random() < self.rates.rebuild:
            await self._rebuild(engine)

    def _duplicate(self, engine: Engine) -> None:
        members = [m for m in engine.bus.members if m.kind != "watch" and not m.paused]
        if not members:
            return
        member = members[self.rng.randrange(len(members))]
        recent = member.recent(8)
        if recent and member.duplicate(recent[self.rng.randrange(len(recent))]):
            self.injected["duplicate"] += 1

    async def _rebuild(self, engine: Engine) -> None:
        if engine.down:
            return
        names = sorted(engine.runtimes)
        name = names[self.rng.randrange(len(names))]
        self._note("rebuild", f"{name} rebuilds its state from its changelog")
        try:
            await engine.runtimes[name].rebuild()
        except InstanceCrash:
            await engine.restart(name)

    def _note(self, kind: str, what: str) -> None:
        self.injected[kind] += 1
        engine = self._engine
        if engine is not None:
            self.trace.append((engine.clock.now(), engine.steps, what))

    # -- invariants ----------------------------------------------------------------------------

    async def check(self, engine: Engine) -> None:
        if not self.invariants.broken:
            await self._check_bookings(engine)
        if self.invariants.broken:
            raise Violation(self.seed, engine.clock.now(), engine.steps, self.invariants.broken[0])

    async def _check_bookings(self, engine: Engine) -> None:
        for cluster in engine.scenario.clusters:
            nodes = await engine.store.nodes(cluster.name)
            booked: dict[str, dict[str, float]] = {}
            for binding in (await engine.store.allocations(cluster.name)).values():
                on_node = booked.setdefault(binding.node, {})
                for resource, amount in binding.request.items():
                    on_node[resource] = on_node.get(resource, 0.0) + amount
            for node, request in booked.items():
                allocatable = nodes[node].allocatable if node in nodes else {}
                over = sorted(
                    r
                    for r, a in request.items()
                    if r in allocatable and a > allocatable[r] * (1 + TOLERANCE) + TOLERANCE
                )
                if over:
                    self.invariants.broken.append(
                        f"node {node} in {cluster.name} books {over[0]} {request[over[0]]:g} > "
                        f"allocatable {allocatable[over[0]]:g}"
                    )
                    return

    def compare(self, baseline: output.Result, result: output.Result, engine_time: float, steps: int) -> None:
        """Every Job and HyperJob the scenario created ends in the phase it ends in without chaos.
        (A HyperJob's children are its own business: whether a child was dispatched before a
        suspend, say, depends on the interleaving; the HyperJob's phase says how it ended.)"""
        for kind, want, got in (
            ("Job", _plain_jobs(baseline), _plain_jobs(result)),
            ("HyperJob", _phases(baseline["hyperJobs"]), _phases(result["hyperJobs"])),
        ):
            for name in sorted(set(want) | set(got)):
                if want.get(name) != got.get(name):
                    raise Violation(
                        self.seed,
                        engine_time,
                        steps,
                        f"{kind} {name} ends {got.get(name) or 'missing'}, without chaos {want.get(name) or 'missing'}",
                    )


def _phases(objects: Sequence[output.JobRow | output.HyperJobRow]) -> dict[str, str]:
    return {o["name"]: o["phase"] for o in objects}


def _plain_jobs(result: output.Result) -> dict[str, str]:
    return _phases([j for j in result["jobs"] if not j.get("hyperJob")])


@dataclass
class ChaosRun:
    """One chaos run that held: its result and what was injected."""

    seed: int
    result: output.Result
    steps: int
    injected: Counter[str]

    def summary(self) -> str:
        faults = ", ".join(f"{n} {k}" for k, n in sorted(self.injected.items())) or "no faults drawn"
        return f"chaos seed {self.seed}: {self.steps} steps, {faults}; every invariant held"


def run(scenario: Scenario, seed: int, baseline: output.Result, rates: Rates = Rates()) -> ChaosRun:
    """Run ``scenario`` under chaos ``seed`` and compare its end with ``baseline`` (the run without
    chaos). Raises ``Violation`` at the first invariant broken."""
    from .engine import Engine

    chaos = Chaos(seed, rates)
    engine = Engine(scenario, chaos)
    result = asyncio.run(engine.run())
    chaos.compare(baseline, result, engine.clock.now(), engine.steps)
    return ChaosRun(seed=seed, result=result, steps=engine.steps, injected=chaos.injected)
