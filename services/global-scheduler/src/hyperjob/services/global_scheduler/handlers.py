"""Admitting owners by their global queue, placing their children, and their cross-cluster gangs.

The global-scheduler keeps the admission candidates (``owner``), where each child is
(``placement``, a ``fleetcore.placement_step`` state machine) and each open gang attempt
(``gang``, ``fleetcore.gang_step``). It learns capacity from the clusters' summaries and the
queues from the configuration stream. Its round (every period, and soon after anything changes)
admits what the queues allow, opens gang attempts that can fit, and places waiting children
where their whole gang fits now; a gang's deadline is a timer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from hyperjob import api, events, fleetcore, records
from hyperjob.api.quantity import add
from hyperjob.events import subjects
from hyperjob.fleetcore import placement_state as ps
from hyperjob.servicekit import Reaction, Runtime, present
from hyperjob.telemetry.spans import decision

from . import domain

TERMINAL_JOB_PHASES = ("Completed", "Failed", "Aborted", "Terminated")
# A dispatched child's pods count against its cluster until it runs there, at most this long (s):
# a cluster's summary counts pods only once they are bound.
IN_FLIGHT_SETTLING = 60.0
# How often (s) a HyperJob whose planned child waits for room while another cluster has it may ask
# the splitter to plan it again (the splitter's view may lag; it keeps a plan that would not move).
ROOM_RETRY_PERIOD = 10.0
ENQUEUED_PODGROUP_PHASES = ("Inqueue", "Running")


# What the cluster-scheduler is told to do with a gang member, by fleetcore's decision.
_GANG_ACTIONS: dict[type, Literal["reserve", "start", "release"]] = {
    fleetcore.Reserve: "reserve",
    fleetcore.Bind: "start",
    fleetcore.Release: "release",
}


class GlobalScheduler:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.owners = runtime.table(records.OWNER, records.OwnerDoc)
        self.placements = runtime.table(records.PLACEMENT, records.PlacementDoc)
        self.children_of = self.placements.index(lambda p: p.owner)
        # Children sent and not running there yet: each unit's working view takes their room.
        self.sent = self.placements.index_many(lambda p: ("sent",) if domain.not_running_yet(p) else ())
        self.gangs = runtime.table(records.GANG, fleetcore.HyperJobGang)
        self.capacity = domain.Capacity()
        self.queues: dict[str, fleetcore.FleetQueue] = {}
        self._working: dict[str, fleetcore.ClusterCapacity] | None = None
        self.in_flight = domain.InFlight()
        self.room_asked: dict[str, float] = {}  # owner -> when it last asked to be planned again
        runtime.on_load(self.rearm)

    # -- what it learns ------------------------------------------------------------------------------

    def on_capacity(self, msg: events.ClusterCapacityReported) -> None:
        if self.capacity.report(msg, self.rt.now()):
            self.rt.kick("round")

    def on_queue(self, msg: events.QueueChanged) -> None:
        if msg.deleted:
            self.queues.pop(msg.name, None)
        else:
            self.queues[msg.name] = domain.fleet_queue(msg)
        self.rt.kick("round")

    # -- owners --------------------------------------------------------------------------------------

    def on_submitted(self, msg: events.OwnerSubmitted) -> None:
        current = self.owners.get(msg.name)
        if current is None or current.withdrawn:
            current = records.OwnerDoc(name=msg.name, plain=msg.plain, queue=msg.queue, request={}, created=0.0)
        elif current.generation == msg.generation:
            self.rt.kick("round")
            return
        # New, or what it asks changed (where it stands did not).
        asks = msgspec.structs.replace(
            current,
            queue=msg.queue,
            priority=msg.priority,
            request=msg.request,
            created=msg.created,
            generation=msg.generation,
        )
        self.owners.put(msg.name, asks)
        self.rt.kick("round")

    def on_withdrawn(self, msg: events.OwnerWithdrawn) -> None:
        owner = self.owners.get(msg.name)
        if owner is None:
            return
        if not owner.admitted and not self._children(msg.name):
            self.owners.delete(msg.name)
        else:
            self.owners.put(msg.name, msgspec.structs.replace(owner, withdrawn=True))
        self._release_gang(msg.name, Reaction())
        self.rt.kick("round")

    # -- children ------------------------------------------------------------------------------------

    def on_place(self, msg: events.PlaceChildren) -> Reaction:
        owner = self.owners.get(msg.owner)
        if owner is not None:
            world = events.World(hyperjob=msg.hyperjob, plan=msg.plan, world_size=msg.world_size) if msg.plan else None
            self.owners.put(msg.owner, msgspec.structs.replace(owner, gang=msg.gang, attempt=msg.attempt, world=world))
        reaction = Reaction()
        for child in msg.children:
            request = records.PlacementDoc(
                child=child.name,
                owner=msg.owner,
                plain=msg.plain,
                replicated_job=child.replicated_job,
                clusters=list(child.clusters),
                job=child.job,
                template_hash=child.template_hash,
                requested_at=self.rt.now(),
                attempt=msg.attempt,
            )
            self._step(msg, child.name, ps.Requested(), reaction, request=request)
        self._place_owner(msg.owner, reaction)
        return reaction

    def on_unplace(self, msg: events.RemoveChild) -> Reaction:
        return self._step(msg, msg.child, ps.Remove(), Reaction())

    def on_move(self, msg: events.MoveChild) -> Reaction:
        return self._step(msg, msg.child, ps.Move(to_cluster=msg.to_cluster, reason=msg.reason), Reaction())

    def on_removed(self, msg: events.JobRemoved) -> Reaction:
        reaction = self._step(msg, msg.job, ps.Removed(cluster=msg.cluster, refused=msg.reason), Reaction())
        self.rt.kick("round")
        return reaction

    def on_job_phase(self, msg: events.JobPhaseChanged) -> None:
        """A child that finished no longer holds its queue's share (nor does its owner, once all did);
        one that left Pending is in its cluster's summary from now on."""
        progress = {"finished": msg.new in TERMINAL_JOB_PHASES} | ({"running": True} if msg.new != "Pending" else {})
        self._child_progress(msg.job, msg.cluster, **progress)

    def on_podgroup_phase(self, msg: events.PodGroupPhaseChanged) -> None:
        """A plain Job counts against its global queue once its cluster's Volcano enqueued it."""
        if msg.phase != "Unknown":
            self._child_progress(msg.job, msg.cluster, enqueued=msg.phase in ENQUEUED_PODGROUP_PHASES)

    def _child_progress(self, child: str, cluster: str, **progress: bool) -> None:
        placement = self.placements.get(child)
        if placement is None or placement.cluster != cluster:
            return
        updated = msgspec.structs.replace(placement, **progress)
        if updated != placement:
            self.placements.put(child, updated)
            self.rt.kick("round")

    def _step(
        self,
        cause: events.Message | str,
        child: str,
        event: ps.PlacementEvent,
        reaction: Reaction,
        request: records.PlacementDoc | None = None,
    ) -> Reaction:
        """One placement event: the state machine decides, this carries out its commands."""
        doc = self.placements.get(child)
        current = ps.Placement(state=doc.state, cluster=doc.cluster, reason=doc.reason) if doc else None
        new, commands = ps.placement_step(current, event)
        if new is None:
            self.placements.delete(child)
        else:
            base = present(doc if doc is not None else request, f"the placement of {child}")
            if isinstance(event, ps.Requested) and request is not None:
                base = request if new.state == "Waiting" else msgspec.structs.replace(base, next=request)
            moved = isinstance(event, ps.Move) and new.cluster != base.cluster and bool(new.cluster)
            sent = any(isinstance(c, ps.DispatchTo) for c in commands)
            self.placements.put(
                child,
                msgspec.structs.replace(
                    base,
                    state=new.state,
                    cluster=new.cluster,
                    reason=new.reason,
                    moves=base.moves + moved,
                    dispatched_at=self.rt.now() if sent else base.dispatched_at,
                    running=base.running and not sent,
                ),
            )
        for command in commands:
            self._carry_out(cause, child, doc or request, command, reaction)
        return reaction

    def _carry_out(
        self,
        cause: events.Message | str,
        child: str,
        doc: records.PlacementDoc | None,
        command: ps.PlacementCommand,
        reaction: Reaction,
    ) -> None:
        owner = doc.owner if doc is not None else child
        if isinstance(command, ps.DispatchTo):
            placed = self.placements.require(child)
            decision("child_placed", hyperjob=owner, child=child, cluster=command.cluster, reason="fits")
            reaction.publish(subjects.dispatch(command.cluster), self._dispatch(cause, placed, command.cluster))
        elif isinstance(command, ps.RemoveFrom):
            reaction.publish(
                subjects.remove_child(command.cluster),
                events.RemoveChild(
                    **self.rt.envelope(cause, f"remove/{child}/{command.cluster}"), child=child, cluster=command.cluster
                ),
            )
        elif isinstance(command, ps.Announce):
            version = self.placements.versions.get(child, 0)
            decision("child_waits", hyperjob=owner, child=child, reason=command.reason)
            reaction.publish(
                subjects.CHILD_WAITING,
                events.ChildPlacementWaiting(
                    **self.rt.envelope(cause, f"waiting/{child}/{version}/{command.reason}"),
                    child=child,
                    hyperjob="" if doc is not None and doc.plain else owner,
                    reason=command.reason,
                ),
            )
        elif isinstance(command, ps.Forget) and command.unplaced:
            # Never dispatched anywhere: it is gone as soon as it is forgotten.
            reaction.publish(
                subjects.job_removed("unplaced"),
                events.JobRemoved(
                    **self.rt.envelope(cause, f"removed/{child}"),
                    cluster="",
                    job=child,
                    hyperjob="" if doc is not None and doc.plain else owner,
                ),
            )
        elif isinstance(command, ps.PlaceNext):
            current = self.placements.get(child)
            if current is not None and current.next is not None:
                self.placements.put(
                    child, msgspec.structs.replace(current.next, state="Waiting", cluster="", reason=ps.QUEUE_WAIT)
                )

    def _dispatch(
        self, cause: events.Message | str, placement: records.PlacementDoc, cluster: str
    ) -> events.DispatchChild:
        owner = self.owners.get(placement.owner)
        gang = self.gangs.get(placement.owner)
        gated = gang is not None and placement.child in gang.children and gang.phase == "Reserving"
        return events.DispatchChild(
            **self.rt.envelope(cause, f"dispatch/{placement.child}/{cluster}/{placement.requested_at!r}"),
            child=placement.child,
            cluster=cluster,
            hyperjob="" if placement.plain else placement.owner,
            replicated_job=placement.replicated_job,
            job=placement.job,
            world=owner.world if owner is not None else None,
            gang=placement.owner if gated else "",
            gang_attempt=gang.attempt if gated and gang is not None else 0,
            attempt=placement.attempt,
        )

    def _children(self, owner: str) -> list[records.PlacementDoc]:
        rows = self.placements.rows
        return [rows[name] for name in self.children_of.names(owner)]

    # -- the cross-cluster gang ------------------------------------------------------------------------

    def on_reservation(self, msg: events.ReservationHeld) -> Reaction | None:
        gang = self.gangs.get(msg.hyperjob)
        if gang is None or msg.attempt != gang.attempt:
            return None  # a reservation of an earlier attempt: already released
        event = (fleetcore.ReservationHeld if msg.held else fleetcore.ReservationLost)(
            child=msg.child, cluster=msg.cluster
        )
        return self._gang_step(msg, gang, event)

    def _gang_step(
        self, cause: events.Message | str, gang: fleetcore.HyperJobGang, event: fleetcore.GangEvent
    ) -> Reaction:
        gang, decisions = fleetcore.gang_step(gang, event, self.rt.now())
        self.gangs.put(gang.hyperjob, gang)
        return self._gang_decisions(cause, gang, decisions, Reaction())

    def _gang_decisions(
        self,
        cause: events.Message | str,
        gang: fleetcore.HyperJobGang,
        decisions: Sequence[fleetcore.GangDecision],
        reaction: Reaction,
    ) -> Reaction:
        """Reserve: dispatch the child gated; Bind: start it; Release: give its nodes back; Retry:
        ask the splitter for a new plan (it may fit on other clusters now)."""
        for d in decisions:
            placement = self.placements.get(getattr(d, "child", ""))
            if isinstance(d, fleetcore.Reserve) and placement is not None and placement.state != "Dispatched":
                self._step(cause, d.child, ps.Dispatch(cluster=d.cluster), reaction)
            elif isinstance(d, fleetcore.Reserve | fleetcore.Bind | fleetcore.Release):
                action = _GANG_ACTIONS[type(d)]
                reaction.publish(
                    subjects.gang_control(d.cluster),
                    events.GangControl(
                        **self.rt.envelope(cause, f"gang/{d.child}/{action}/{gang.attempt}"),
                        child=d.child,
                        cluster=d.cluster,
                        action=action,
                        attempt=gang.attempt,
                    ),
                )
            elif isinstance(d, fleetcore.StartTimer):
                self._arm(gang.hyperjob, d.attempt, d.at)
            elif isinstance(d, fleetcore.Retry):
                reaction.publish(
                    subjects.GANG_RETRY,
                    events.GangRetry(
                        **self.rt.envelope(cause, f"gang-retry/{gang.attempt}"),
                        owner=gang.hyperjob,
                        attempt=gang.attempt + 1,
                        reason=d.reason,
                    ),
                )
                reaction.publish(
                    subjects.CHILD_WAITING,
                    events.ChildPlacementWaiting(
                        **self.rt.envelope(cause, f"gang-retry-reason/{gang.attempt}"),
                        child="",
                        hyperjob=gang.hyperjob,
                        reason=d.reason,
                    ),
                )
        return reaction

    def on_lifecycle(self, msg: events.OwnerLifecycle) -> Reaction | None:
        """Suspend gives the gang's holds back; resume and restart start the gang over, so the
        children's new pods start together again, as at first."""
        owner = self.owners.get(msg.name)
        if owner is None or owner.gang < 2:
            return None
        if msg.lifecycle == "Suspended":
            return self._release_gang(msg.name, Reaction())
        children = self._children(msg.name)
        if not children or any(p.state != "Dispatched" for p in children):
            return None  # not placed yet: the round opens the gang when they are
        gang = self.gangs.get(msg.name)
        attempt = gang.attempt + 1 if gang is not None else 1
        gang, decisions = fleetcore.start_gang(
            msg.name,
            {p.child: p.cluster for p in sorted(children, key=lambda p: p.child)},
            owner.gang,
            self.rt.now(),
            attempt=attempt,
        )
        self.gangs.put(msg.name, gang)
        return self._gang_decisions(msg, gang, decisions, Reaction())

    def _release_gang(self, owner: str, reaction: Reaction) -> Reaction:
        gang = self.gangs.get(owner)
        if gang is None:
            return reaction
        gang, decisions = fleetcore.release_gang(gang)
        self.gangs.put(owner, gang)
        return self._gang_decisions(events.derive_id(owner, f"release/{gang.attempt}"), gang, decisions, reaction)

    def rearm(self) -> None:
        for owner, gang in self.gangs.items():
            if gang.phase == "Reserving":
                self._arm(owner, gang.attempt, gang.deadline)

    def _arm(self, owner: str, attempt: int, at: float) -> None:
        self.rt.at(at, f"gang/{owner}", lambda: self._deadline(owner, attempt))

    async def _deadline(self, owner: str, attempt: int) -> None:
        gang = self.gangs.get(owner)
        if gang is None or gang.attempt != attempt or gang.phase != "Reserving":
            return
        doc = self.owners.get(owner)
        life = doc.created if doc is not None else 0.0  # a HyperJob applied again under the same name
        cause = events.derive_id(owner, f"gang-deadline/{life!r}/{attempt}")
        await self.rt.commit(cause, self._gang_step(cause, gang, fleetcore.GangTimer(attempt=attempt)))

    # -- the round ------------------------------------------------------------------------------------

    async def round(self) -> None:
        await self.rt.ensure_fresh()
        reaction = Reaction()
        self._forget_finished()
        self._admit(reaction)
        # Only owners with a child not dispatched have anything to place: in a burst most owners
        # run already, and visiting each of them every round cost more than the placing.
        for name in sorted({p.owner for p in self.placements.rows.values() if p.state != "Dispatched"}):
            self._place_owner(name, reaction)
        await self.rt.commit(domain.round_cause(self.rt.instance, self.rt.now(), reaction), reaction)

    def working(self) -> dict[str, fleetcore.ClusterCapacity]:
        """The live clusters' capacity for this unit of work, with what it placed already taken."""
        if self._working is None:
            live = dict(self.capacity.live(self.capacity.now(self.rt.now())))
            since = self.rt.now() - IN_FLIGHT_SETTLING
            sent = [self.placements.rows[name] for name in self.sent.names("sent")]
            self._working = self.in_flight.taken(live, sent, since)
        return self._working

    def end_unit(self) -> None:
        self._working = None

    def _forget_finished(self) -> None:
        """An owner whose every child finished no longer holds its queue's share; a deleted one
        is forgotten once its last child is gone."""
        self.in_flight.forget(set(self.sent.names("sent")))
        for name, owner in self.owners.items():
            children = self._children(name)
            if (owner.withdrawn and not children) or (
                owner.admitted and children and all(c.finished for c in children)
            ):
                self.owners.delete(name)
                if name in self.gangs:
                    self.gangs.delete(name)

    def _admit(self, reaction: Reaction) -> None:
        """HyperJobs are admitted by their global queue over the fleet. A plain Job goes to its
        cluster at once, where Volcano's enqueue (and reclaim) decides it as with one cluster; it
        counts against its global queue by its request from then on, as an admitted HyperJob does."""
        waiting = [o for o in self.owners.values() if not o.admitted and not o.withdrawn]
        for owner in [o for o in waiting if o.plain]:
            self._admitted(owner, reaction)
        waiting = [o for o in waiting if not o.plain]
        if not waiting:
            return
        queues = dict(self.queues)
        queues.setdefault(api.DEFAULT_QUEUE, fleetcore.FleetQueue(name=api.DEFAULT_QUEUE))
        allocated: dict[str, dict[str, float]] = {}
        preemptible: list[tuple[int, dict[str, float]]] = []  # what coordinated preemption could take back
        for owner in self.owners.values():
            counts = owner.admitted and (
                not owner.plain or any(p.enqueued and not p.finished for p in self._children(owner.name))
            )
            if counts:
                allocated[owner.queue] = add(allocated.get(owner.queue, {}), owner.request)
                preemptible.append((owner.priority, owner.request))
        candidates = [
            fleetcore.Candidate(name=o.name, queue=o.queue, priority=o.priority, request=o.request, created=o.created)
            for o in waiting
        ]
        live = self.capacity.live(self.capacity.now(self.rt.now()))
        capacity = fleetcore.fleet_capacity(live.values())
        admission = fleetcore.admit(queues, allocated, candidates, capacity, preemptible)
        for name in admission.admitted:
            self._admitted(self.owners.rows[name], reaction)
        for name, why in admission.waiting.items():
            self._owner_waits(name, f"queue {self.owners.rows[name].queue}: {why}", reaction)

    def _admitted(self, owner: records.OwnerDoc, reaction: Reaction) -> None:
        self.owners.put(owner.name, msgspec.structs.replace(owner, admitted=True, reason=""))
        with self.rt.span("admit", owner.name, hyperjob=owner.name, queue=owner.queue):
            decision("owner_admitted", hyperjob=owner.name, queue=owner.queue, plain=owner.plain)
            reaction.publish(
                subjects.OWNER_ADMITTED,
                events.OwnerAdmitted(
                    **self.rt.envelope(owner.name, f"admitted/{owner.created!r}/{owner.generation}"),
                    name=owner.name,
                    queue=owner.queue,
                    generation=owner.generation,
                ),
            )

    def _owner_waits(self, name: str, reason: str, reaction: Reaction) -> None:
        owner = self.owners.get(name)
        if owner is None or owner.reason == reason:
            return
        self.owners.put(name, msgspec.structs.replace(owner, reason=reason))
        version = self.owners.versions.get(name, 0)
        with self.rt.span("admit", name, hyperjob=name, queue=owner.queue):
            decision("owner_held", hyperjob=name, queue=owner.queue, reason=reason)
            reaction.publish(
                subjects.CHILD_WAITING,
                events.ChildPlacementWaiting(
                    **self.rt.envelope(name, f"owner-wait/{owner.created!r}/{version}/{reason}"),
                    child=name if owner.plain else "",
                    hyperjob="" if owner.plain else name,
                    reason=reason,
                ),
            )

    def _place_owner(self, name: str, reaction: Reaction) -> None:
        """Place what the owner has waiting: its gang as a whole, or each child where it fits."""
        owner = self.owners.get(name)
        if owner is None or not owner.admitted or owner.withdrawn:
            return
        # The children still to place (an update may add some beside children that run): a gang
        # when more than one must start together.
        unplaced = [p for p in sorted(self._children(name), key=lambda p: p.child) if p.state != "Dispatched"]
        if owner.gang >= 2 and len(unplaced) >= 2:
            self._open_gang(owner, unplaced, reaction)
            return
        now = self.capacity.now(self.rt.now())
        for placement in unplaced:
            if placement.state != "Waiting":
                continue
            chosen = domain.choose(placement, self.working(), now)
            if isinstance(chosen, fleetcore.Waiting):
                if self._plan_again(owner, [placement], reaction):
                    return
                if len(unplaced) == 1 and self._preempt_alone(owner, placement, reaction):
                    continue
            cause = events.derive_id(placement.child, f"place/{placement.requested_at!r}")
            event = (
                ps.Wait(reason=chosen.reason) if isinstance(chosen, fleetcore.Waiting) else ps.Dispatch(cluster=chosen)
            )
            with self.rt.span("place child", name, hyperjob=name, job=placement.child):
                self._step(cause, placement.child, event, reaction)

    def _plan_again(self, owner: records.OwnerDoc, waiting: list[records.PlacementDoc], reaction: Reaction) -> bool:
        """HyperJob children that cannot fit where they were planned, none of the HyperJob's
        children sent yet, while another cluster has room for one of them now: ask the splitter
        for a new plan (at most every ``ROOM_RETRY_PERIOD``) instead of waiting there for ever.
        The splitter keeps a plan that would not move (it may be pinned to its clusters)."""
        if owner.plain or any(p.state == "Dispatched" for p in self._children(owner.name)):
            return False
        if self.rt.now() < self.room_asked.get(owner.name, -ROOM_RETRY_PERIOD) + ROOM_RETRY_PERIOD:
            return False
        now = self.capacity.now(self.rt.now())
        found = ((p, domain.room_elsewhere(p, self.working(), now)) for p in waiting if len(p.clusters) == 1)
        child, elsewhere = next(((p, c) for p, c in found if c), (None, ""))
        if child is None:
            return False
        self.room_asked[owner.name] = self.rt.now()
        reason = f"{fleetcore.ROOM_RETRY}{child.child} waits for room on {child.clusters[0]}, {elsewhere} has it"
        decision("child_replanned", hyperjob=owner.name, child=child.child, cluster=elsewhere, reason=reason)
        reaction.publish(
            subjects.GANG_RETRY,
            events.GangRetry(
                **self.rt.envelope(owner.name, f"room-retry/{owner.created!r}/{owner.attempt}/{self.rt.now()!r}"),
                owner=owner.name,
                attempt=owner.attempt + 1,
                reason=reason,
            ),
        )
        return True

    def _open_gang(self, owner: records.OwnerDoc, children: list[records.PlacementDoc], reaction: Reaction) -> None:
        """A gang attempt opens when every child to place waits and the gang fits the room no open
        attempt is holding: gangs never wait on each other's partial holds."""
        gang = self.gangs.get(owner.name)
        if any(p.state != "Waiting" for p in children):
            return
        if gang is not None and gang.phase == "Reserving":
            return
        attempt = gang.attempt + 1 if gang is not None else 1
        fits = domain.reserve_room(children, self.working())
        if isinstance(fits, str):
            if self._plan_again(owner, children, reaction):
                return
            # Free room elsewhere goes to a new plan first (the splitter keeps a pinned one): preempt after.
            if not self._preempt_for(owner, children, attempt, reaction):
                self._owner_waits(owner.name, f"cross-cluster gang: {fits}", reaction)
                return
        self._start_gang(owner, children, attempt, reaction)

    def _preempt_alone(self, owner: records.OwnerDoc, child: records.PlacementDoc, reaction: Reaction) -> bool:
        """A lone child (a one-child HyperJob, a plain Job) that free room cannot hold preempts as a
        gang does (``_preempt_for``: all its pods placed on the room lower-priority work gives
        back, or nothing evicted) and is sent to its cluster at once; there the victims' own pods
        wait until it has taken the room (the cluster-scheduler's gate). False: it waits."""
        gang = self.gangs.get(owner.name)
        attempt = gang.attempt + 1 if gang is not None else 1
        if not self._preempt_for(owner, [child], attempt, reaction):
            return False
        cause = events.derive_id(child.child, f"preempt-place/{child.requested_at!r}/{attempt}")
        with self.rt.span("place child", owner.name, hyperjob=owner.name, job=child.child):
            self._step(cause, child.child, ps.Dispatch(cluster=child.clusters[0]), reaction)
        return True

    def _start_gang(
        self, owner: records.OwnerDoc, children: list[records.PlacementDoc], attempt: int, reaction: Reaction
    ) -> None:
        """Open a gang attempt: every child holds room on its planned cluster until all hold."""
        plan = {p.child: p.clusters[0] for p in children}
        gang, decisions = fleetcore.start_gang(
            owner.name, plan, max(1, min(owner.gang, len(plan))), self.rt.now(), attempt=attempt
        )
        self.gangs.put(owner.name, gang)
        with self.rt.span("reserve gang", owner.name, hyperjob=owner.name, attempt=attempt):
            decision(
                "gang_reserving",
                hyperjob=owner.name,
                attempt=attempt,
                clusters=",".join(sorted(set(plan.values()))),
                reason=f"all {len(plan)} children fit",
            )
            # With its life (``created``): a HyperJob applied again under the same name must not
            # send its gang's controls under the ids of the last one's (taken as redeliveries).
            cause = events.derive_id(owner.name, f"gang/{owner.created!r}/{owner.attempt}/{attempt}")
            self._gang_decisions(cause, gang, decisions, reaction)

    def _preempt_for(
        self, owner: records.OwnerDoc, children: list[records.PlacementDoc], attempt: int, reaction: Reaction
    ) -> bool:
        """A gang that free room cannot hold, where lower-priority work could give room back: when
        every child can then be placed (``fleetcore.plan_preemption``, all or nothing), tell each
        cluster of the plan which pods to evict, in this one reaction, and say so; the gang
        attempt opens at once, so its children hold the room before the victims come back."""
        now = self.capacity.now(self.rt.now())
        working = self.working()
        plan = domain.preemption(owner, children, self.placements.values(), self.owners.rows, self.queues, working, now)
        if isinstance(plan, str) or not plan.evictions:
            return False
        reason = plan.explain()
        decision("gang_preempting", hyperjob=owner.name, attempt=attempt, reason=reason)
        cause = events.derive_id(owner.name, f"preempt/{owner.created!r}/{owner.attempt}/{attempt}")
        for cluster, child, victims in domain.preempt_orders(plan):
            order = events.PreemptForGang(
                **self.rt.envelope(cause, f"preempt/{cluster}"),
                child=child,
                cluster=cluster,
                hyperjob=owner.name,
                attempt=attempt,
                victims=victims,
                reason=reason,
            )
            reaction.publish(subjects.gang_control(cluster), order)
        return True
