"""The split of an admitted HyperJob into children on clusters, made again when a gang retries or a
child fails beyond its own retries."""

from __future__ import annotations

from msgspec.structs import replace

from hyperjob import api, events, fleetcore, records
from hyperjob.events import subjects
from hyperjob.servicekit import Reaction
from hyperjob.telemetry.spans import decision

from . import domain, messages
from .room import Room
from .state import SplitterState


class Planner:
    """Plans an admitted HyperJob's children (``split``) and asks the global-scheduler to place them.

    Invariants, enforced here:
    - A plan is made on the working view of the fleet (``Room.working``): the room children
      planned lately will take is taken, so one burst does not land on one cluster. Only when no
      plan fits the free room is the room of lower-priority running work counted, one cluster
      more at a time (the global scheduler then preempts for it, all or nothing).
    - No child takes a job name another Job or HyperJob child goes by: such a split waits.
    - A HyperJob that waits says why once per reason (a split that waits alike sends nothing).
    - A redone split sends the same messages: every id derives from the HyperJob's incarnation,
      generation and attempt, and only children whose template or cluster changed are replaced.
    - A gang retry acts only for an attempt newer than the plan's, on an active HyperJob; one for
      want of room only when a plan made now would move some child.
    """

    def __init__(self, state: SplitterState, room: Room) -> None:
        self.state = state
        self.room = room
        self.rt = state.rt

    def on_admitted(self, msg: events.OwnerAdmitted) -> Reaction | None:
        doc = self.state.hyperjobs.get(msg.name)
        if doc is None or doc.deleting or doc.admitted:
            return None
        doc = replace(doc, admitted=True)
        self.state.put(doc)
        if doc.lifecycle != "Active":
            return None  # suspended before it was placed: planned once resumed
        if doc.plain:
            child = domain.plain_child(doc, sorted(self.state.capacity.clusters))
            return Reaction().publish(
                subjects.PLACE_CHILDREN,
                events.PlaceChildren(
                    **self.rt.envelope(msg, f"place/{doc.name}/{doc.created!r}"),
                    owner=doc.name,
                    plain=True,
                    children=[child],
                ),
            )
        return self.split(Reaction(), msg, doc)

    def split(self, reaction: Reaction, cause: events.Message | str, doc: records.HyperJobDoc) -> Reaction:
        """Plan ``doc``'s children (again, keeping the clusters of the plan in force) and ask for
        them to be placed, or say why it waits."""
        hyperjob = self.state.hyperjob(doc)
        result = self._plan(doc, hyperjob)
        if isinstance(result, fleetcore.Waiting):
            return self._wait(reaction, cause, doc, result.reason, decided=True)
        taken = self._names_taken(doc.name, [ref.name for ref in result.refs])
        if taken:
            return self._wait(reaction, cause, doc, f"child {taken}: a job of that name already exists")
        return self._place(reaction, cause, doc, hyperjob, result)

    def _plan(self, doc: records.HyperJobDoc, hyperjob: api.HyperJob) -> domain.Planned | fleetcore.Waiting:
        now = self.state.capacity.now(self.rt.now())
        # Room that children planned lately will take is taken: a burst does not land on one cluster.
        live = self.room.working(now, exclude={ref.name for ref in doc.children})
        current = domain.split_plan(doc) if doc.children else None
        waited = self.rt.now() - doc.created  # Incremental dispatch widens with it
        result = domain.plan(hyperjob, live, now, current, waited)
        if not isinstance(result, fleetcore.Waiting):
            return result
        # Planned on the room lower-priority work could give back: the global scheduler then
        # preempts for it, all or nothing (``fleetcore.plan_preemption``), or it waits there.
        for view in self.room.without_lower_priority(doc, live):
            preempting = domain.plan(hyperjob, view, now, current, waited)
            if not isinstance(preempting, fleetcore.Waiting):
                return preempting
        return result

    def _wait(
        self,
        reaction: Reaction,
        cause: events.Message | str,
        doc: records.HyperJobDoc,
        reason: str,
        decided: bool = False,
    ) -> Reaction:
        """Say why ``doc``'s split waits, once per reason (``decided``: a plan that found no room)."""
        if doc.waiting_reason != reason:
            if decided:
                decision("hyperjob_split_waits", hyperjob=doc.name, reason=reason)
            self.state.put(replace(doc, waiting_reason=reason))
            reaction.publish(subjects.CHILD_WAITING, messages.child_waiting(self.rt, cause, doc, reason))
        return reaction

    def _place(
        self,
        reaction: Reaction,
        cause: events.Message | str,
        doc: records.HyperJobDoc,
        hyperjob: api.HyperJob,
        result: domain.Planned,
    ) -> Reaction:
        """Replace the children the plan changed and ask for the new ones to be placed."""
        place, remove = domain.changes(doc.children, result.refs)
        for ref in remove:
            reaction.publish(
                subjects.UNPLACE_CHILD,
                events.RemoveChild(
                    **self.rt.envelope(cause, f"unplace/{ref.name}/{doc.generation}/{doc.attempt}"),
                    child=ref.name,
                    cluster=ref.cluster,
                ),
            )
        children = [c for c in result.children if c.name in place]
        staying = {(ref.name, ref.cluster) for ref in result.refs}  # replaced in place: still takes its room
        self.room.withdraw([ref for ref in remove if (ref.name, ref.cluster) not in staying])
        self.room.promise(hyperjob, doc.children, result.refs)
        self.state.put(replace(doc, children=result.refs, world_size=result.world_size, waiting_reason=""))
        decision(
            "hyperjob_split",
            hyperjob=doc.name,
            children=len(result.refs),
            clusters=",".join(sorted({c for ref in result.refs for c in [ref.cluster] if c})),
            world_size=result.world_size,
            gang=result.gang,
            reason=f"{len(place)} to place, {len(remove)} to remove",
        )
        return reaction.publish(subjects.PLACE_CHILDREN, self._place_children(cause, doc, result, children))

    def _place_children(
        self,
        cause: events.Message | str,
        doc: records.HyperJobDoc,
        result: domain.Planned,
        children: list[events.PlannedChild],
    ) -> events.PlaceChildren:
        return events.PlaceChildren(
            **self.rt.envelope(cause, f"place/{doc.created!r}/{doc.generation}/{doc.attempt}"),
            owner=doc.name,
            generation=doc.generation,
            attempt=doc.attempt,
            children=children,
            gang=result.gang,
            hyperjob=doc.manifest,
            plan=result.refs,
            world_size=result.world_size,
        )

    def _names_taken(self, owner: str, names: list[str]) -> str:
        """The first of ``names`` another Job or HyperJob child already goes by ("" if none)."""
        taken = (name for name in sorted(names) if set(self.state.owners_of_name.names(name)) - {owner})
        return next(taken, "")

    def on_gang_retry(self, msg: events.GangRetry) -> Reaction | None:
        """The gang's reservations did not all hold in time: plan again (it may fit elsewhere now),
        replacing every child."""
        doc = self.state.hyperjobs.get(msg.owner)
        if doc is None or doc.deleting or msg.attempt <= doc.attempt or doc.lifecycle != "Active":
            return None
        if msg.reason.startswith(fleetcore.ROOM_RETRY) and not self._plan_moves(doc):
            return None  # the plan would stay as it is: its children wait where they are
        reaction = Reaction()
        for ref in doc.children:
            reaction.publish(
                subjects.UNPLACE_CHILD,
                events.RemoveChild(**self.rt.envelope(msg, f"unplace/{ref.name}"), child=ref.name, cluster=ref.cluster),
            )
        self.room.withdraw(doc.children)
        doc = replace(doc, attempt=msg.attempt, children=[], waiting_reason=msg.reason)
        self.state.put(doc)
        return self.split(reaction, msg, doc)

    def _plan_moves(self, doc: records.HyperJobDoc) -> bool:
        """Would a plan made now put some child of ``doc`` on another cluster?"""
        now = self.state.capacity.now(self.rt.now())
        working = self.room.working(now, exclude={ref.name for ref in doc.children})
        result = domain.plan(self.state.hyperjob(doc), working, now)
        before = {ref.name: ref.cluster for ref in doc.children}
        return not isinstance(result, fleetcore.Waiting) and any(
            before.get(ref.name) != ref.cluster for ref in result.refs
        )

    def on_job_phase(self, msg: events.JobPhaseChanged) -> Reaction | None:
        """A child's phase: kept, the lifecycle settled with it, and a child failed beyond its own
        retries handed to the HyperJob's childFailurePolicy (``fleetcore.child_failed``)."""
        self.room.ran(msg)
        doc = self.state.hyperjobs.get(msg.hyperjob or msg.job)
        if doc is None or msg.job not in {r.name for r in doc.children}:
            return None
        if doc.plain and doc.children[0].cluster != msg.cluster:
            doc = replace(doc, children=[replace(doc.children[0], cluster=msg.cluster)])
        phases = {**doc.child_phases, msg.job: msg.new}
        lifecycle = fleetcore.settle_lifecycle(doc.lifecycle, phases) if not doc.plain else doc.lifecycle
        doc = replace(doc, child_phases=phases, lifecycle=lifecycle)
        self.state.put(doc)
        if msg.new != "Failed" or doc.plain or doc.deleting or doc.lifecycle != "Active":
            return None
        return self._child_failed(msg, doc, phases)

    def _child_failed(self, msg: events.JobPhaseChanged, doc: records.HyperJobDoc, phases: dict[str, str]) -> Reaction:
        capacity = self.state.capacity
        split, decisions = fleetcore.child_failed(
            self.state.hyperjob(doc),
            domain.split_plan(doc),
            msg.job,
            capacity.clusters,
            capacity.now(self.rt.now()),
            phases,
        )
        reaction = messages.carry_out(self.rt, Reaction(), msg, doc, decisions)
        lifecycle = next((d.lifecycle for d in decisions if isinstance(d, fleetcore.SetLifecycle)), doc.lifecycle)
        restarts = doc.restarts + (1 if lifecycle == "Restarting" else 0)
        self.state.put(replace(domain.with_plan(doc, split), lifecycle=lifecycle, restarts=restarts))
        return reaction
