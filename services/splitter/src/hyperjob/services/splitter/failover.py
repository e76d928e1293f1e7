"""What the clusters say (capacity, heartbeats), and the re-planning round it drives: HyperJobs
that did not fit planned again, inadmissible ones submitted once the fleet could hold them, and
children on a lost cluster failed over."""

from __future__ import annotations

from msgspec.structs import replace

from hyperjob import api, events, fleetcore, records
from hyperjob.servicekit import Reaction

from . import domain, messages
from .admission import Admission
from .config import Settings
from .planning import Planner
from .room import Room
from .state import SplitterState

# How a HyperJob's waiting reason starts while a child waits on a lost cluster for room elsewhere.
WAITS = "failover waits:"

Decisions = tuple[fleetcore.SplitPlan | None, list[fleetcore.FleetDecision]]


class Replanning:
    """Follows the fleet's capacity and re-plans as it changes (``replan``, a periodic round also
    kicked by a capacity change or a cluster lost or back).

    Invariants, enforced here:
    - A cluster is lost only as ``fleetcore.cluster_lost`` says (silent past the newest report;
      nodes that still beat keep a hung control plane's children where they are).
    - Children leave a lost cluster only where their gang fits, the room one move takes counted
      for the next (one working view of the fleet per round), at a bounded rate, and not at all
      while the gate is paused (most clusters look lost at once: ``fleetcore.FailoverGate``).
    - A HyperJob whose child waits on a lost cluster says why (``WAITS``); the reason is cleared
      once its clusters are back. PodGroups are never failed over.
    - A round commits only when it decided something, under an id from what it decided
      (``replan_cause``): a round redone alike is one unit of work.
    """

    def __init__(
        self, state: SplitterState, room: Room, planner: Planner, admission: Admission, settings: Settings
    ) -> None:
        self.state = state
        self.room = room
        self.planner = planner
        self.admission = admission
        self.rt = state.rt
        self.lost: set[str] = set()
        self.gate = fleetcore.FailoverGate(rate=settings.failover_rate, burst=settings.failover_burst)
        self.paused = ""

    def on_capacity(self, msg: events.ClusterCapacityReported) -> None:
        capacity = self.state.capacity
        changed = capacity.report(msg, self.rt.now())
        lost = {name for name, cap in capacity.clusters.items() if fleetcore.cluster_lost(cap, capacity.newest)}
        if changed or lost != self.lost:
            self.lost = lost
            self.rt.kick("replan")

    def on_heartbeat(self, msg: events.AgentHeartbeat) -> None:
        """Nodes that still report keep their silent cluster's children where they are (a hung
        control plane is not a lost cluster: ``fleetcore.control_plane_hung``)."""
        self.state.capacity.beat(msg, self.rt.now())

    async def replan(self) -> None:
        """Admitted HyperJobs that did not fit anywhere are planned again as capacity changes, and
        children on a lost cluster (or withdrawn for want of room) are placed again elsewhere:
        only where their gang fits, the room one move takes counted for the next (one working
        view of the fleet per round), at a bounded rate, and not at all while most clusters look
        lost at once (``fleetcore.FailoverGate``)."""
        await self.rt.ensure_fresh()
        reaction = Reaction()
        capacity = self.state.capacity
        now = capacity.now(self.rt.now())
        alive = {n for n, c in capacity.clusters.items() if not fleetcore.cluster_lost(c, now)}
        paused = self._gate(set(capacity.clusters) - alive)
        # The working view only for a round that moves something: placing every child sent lately
        # again, each round, was most of the splitter's time in a burst.
        working = self.room.working(now) if not paused and self._any_on_lost(alive) else {}
        for name, doc in self.state.hyperjobs.items():
            if not doc.admitted and not doc.deleting and doc.waiting_reason.startswith(fleetcore.INADMISSIBLE):
                self.admission.submit(reaction, f"admissible/{name}/{doc.generation}", doc)  # the fleet may hold it now
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

    def _any_on_lost(self, alive: set[str]) -> bool:
        """Whether a HyperJob this round would fail over has a child on a cluster not ``alive``."""
        # Plain loops, not nested generators: this runs every second over every HyperJob ever seen.
        for doc in self.state.hyperjobs.values():
            if doc.lifecycle != "Active" or not doc.admitted or doc.deleting or doc.manifest.get("kind") == "PodGroup":
                continue
            for ref in doc.children:
                if ref.cluster not in alive:
                    return True
        return False

    def _gate(self, lost: set[str]) -> str:
        """Why failovers are paused this round ("" when they are not), logged as it changes."""
        paused = self.gate.paused(lost, self.state.capacity.clusters)
        if paused != self.paused:
            self.paused = paused
            if paused:
                self.rt.log.warning("failovers_paused", why=paused)
            else:
                self.rt.log.info("failovers_resumed")
        return paused

    def _fail_over(
        self, reaction: Reaction, doc: records.HyperJobDoc, working: dict[str, fleetcore.ClusterCapacity]
    ) -> None:
        now = self.state.capacity.now(self.rt.now())
        split, decisions = self._plain_failover(doc, now) if doc.plain else self._failover(doc, now, working)
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

    def _plain_failover(self, doc: records.HyperJobDoc, now: float) -> Decisions:
        capacity, child = self.state.capacity, doc.children[0]
        decisions = fleetcore.plain_failover(
            _job(doc),
            child.name,
            child.cluster,
            capacity.clusters,
            now,
            finished=bool(_finished(doc)),
            nodes_heard=capacity.nodes_heard,
        )
        moving = any(isinstance(d, fleetcore.ChildMove) for d in decisions)
        if moving and not self.gate.take(self.rt.now()):
            decisions = [fleetcore.ChildWaits(child=child.name, cluster=child.cluster, reason="rate-limited")]
        return None, decisions

    def _failover(
        self, doc: records.HyperJobDoc, now: float, working: dict[str, fleetcore.ClusterCapacity]
    ) -> Decisions:
        capacity = self.state.capacity
        split, decisions = fleetcore.failover(
            self.state.hyperjob(doc),
            domain.split_plan(doc),
            capacity.clusters,
            now,
            finished=_finished(doc),
            working=working,
            may_move=lambda: self.gate.take(self.rt.now()),
            nodes_heard=capacity.nodes_heard,
        )
        return split, decisions


def replan_cause(instance: str, now: float, reaction: Reaction) -> str:
    """A re-planning round's id (``events.round_id``), from when it ran and what it decided."""
    return events.round_id(instance, "replan", now, (message.event_id for _, message in reaction.outputs))


def _finished(doc: records.HyperJobDoc) -> list[str]:
    """The children of ``doc`` that ended (their phase is final)."""
    return [c for c, phase in doc.child_phases.items() if phase in fleetcore.TERMINAL_CHILD_PHASES]


def _job(doc: records.HyperJobDoc) -> api.Job:
    return api.expect_kind(api.decode_stored(doc.manifest), api.Job)
