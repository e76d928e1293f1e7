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

from msgspec.structs import replace

from hyperjob import api, events, fleetcore, records
from hyperjob.servicekit import Reaction, Runtime

from . import domain, messages
from .admission import Admission
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
        self.admission = Admission(state, self.planner)
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
