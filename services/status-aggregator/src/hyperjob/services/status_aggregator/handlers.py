"""Folding child news into HyperJob statuses, once per HyperJob and unit of work."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Awaitable, Callable

import msgspec
from msgspec.structs import replace

from hyperjob import events, fleetcore, records
from hyperjob.events import subjects
from hyperjob.servicekit import Reaction, Runtime
from hyperjob.telemetry.spans import decision

from . import domain
from . import metrics as m


class StatusAggregator:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.specs = runtime.table(records.HYPERJOB_SPEC, domain.SpecDoc)
        self.statuses = runtime.table(records.HYPERJOB_STATUS, domain.AggregateDoc)
        self.early = runtime.table(records.HYPERJOB_EARLY_NEWS, domain.EarlyNewsDoc)
        self.dirty: set[str] = set()
        self.owners: dict[str, str] = {}  # child job -> its HyperJob, from the specs
        runtime.on_load(self.on_loaded)

    def on_loaded(self) -> None:
        self.dirty.clear()
        self.owners = {ref.name: name for name, spec in self.specs.items() for ref in spec.children}

    def on_spec(self, msg: events.HyperJobSpecChanged) -> Reaction | None:
        if msg.plain:
            return None  # a plain Job: its own record is its status
        if not msg.manifest:  # gone
            self.on_deleted(msg)
            return None
        current = self.specs.get(msg.name)
        spec = domain.spec_changed(current, msg)
        self.specs.put(msg.name, spec)
        replaced = domain.replaced_in_place(current.children, msg.children) if current is not None else []
        if replaced:
            doc = self.statuses.get(msg.name) or domain.AggregateDoc(name=msg.name)
            self.statuses.put(msg.name, domain.forget_replaced(doc, replaced))
        self.owners.update({ref.name: msg.name for ref in msg.children})
        self.dirty.add(msg.name)
        if current is None:
            self._fold_early_news(spec)
        moves = domain.failovers(current.children, msg.children) if current is not None else []
        return _counted(*(m.FAILOVERS.labels(a, b).inc for a, b in moves))

    def on_admitted(self, msg: events.OwnerAdmitted) -> Reaction | None:
        """Admitted: what its queue made it wait for no longer holds."""
        spec = self.specs.get(msg.name)
        if spec is not None and not spec.admitted:
            self.specs.put(msg.name, replace(spec, admitted=True))
            doc = self.statuses.get(msg.name)
            if doc is not None and doc.waiting_reason:
                self.statuses.put(msg.name, replace(doc, waiting_reason=""))
            self.dirty.add(msg.name)
            return _counted(m.ADMISSIONS.inc)
        return None

    def on_job_phase(self, msg: events.JobPhaseChanged) -> Reaction | None:
        counted = _counted(m.CHILD_PHASES.labels(msg.cluster, msg.new).inc) if msg.new != msg.old else None
        if not msg.hyperjob:
            return counted
        if msg.hyperjob not in self.specs:
            self._keep_early_news(msg)
        else:
            self._fold_news(msg)
        return counted

    def _fold_news(self, msg: events.JobPhaseChanged) -> None:
        doc = self.statuses.get(msg.hyperjob) or domain.AggregateDoc(name=msg.hyperjob)
        key = domain.news_key(msg.job, msg.cluster)
        if msg.attempt and msg.attempt < doc.attempts.get(key, 0):
            return  # news of the child an earlier plan attempt dispatched, arriving late
        if domain.of_replaced_child(doc, msg):
            return  # the child an update replaces, ending: not the plan's child
        self.statuses.put(
            msg.hyperjob,
            replace(
                doc,
                children={**doc.children, key: domain.child_news(msg)},
                attempts={**doc.attempts, key: msg.attempt},
                replaced=[k for k in doc.replaced if k != key],
            ),
        )
        self.dirty.add(msg.hyperjob)

    def _keep_early_news(self, msg: events.JobPhaseChanged) -> None:
        """News of a HyperJob whose spec has not come (yet: a restart can hold the spec back for
        its consumer's ack wait while the children's news flows on). Dropping it would leave the
        HyperJob on its last phase for ever once the spec comes: the news may be its last."""
        now = self.rt.now()
        for name, doc in self.early.items():
            if name != msg.hyperjob and domain.expired(doc, now):
                self.early.delete(name)
        self.early.put(msg.hyperjob, domain.keep_early(self.early.get(msg.hyperjob), msg, now))

    def _fold_early_news(self, spec: domain.SpecDoc) -> None:
        early = self.early.get(spec.name)
        if early is not None:
            self.early.delete(spec.name)
            for msg in domain.early_news_of(early, spec.created):
                self._fold_news(msg)

    def on_podgroup_phase(self, msg: events.PodGroupPhaseChanged) -> None:
        """A child's podgroup waits for a reason its cluster's scheduler gives, or no longer waits."""
        owner = self.owners.get(msg.job)
        if owner is None or owner not in self.specs:
            return
        doc = self.statuses.get(owner) or domain.AggregateDoc(name=owner)
        new = domain.podgroup_news(doc, msg)
        if new != doc:
            self.statuses.put(owner, new)
            self.dirty.add(owner)

    def on_waiting(self, msg: events.ChildPlacementWaiting) -> None:
        if not msg.hyperjob or msg.hyperjob not in self.specs:
            return
        doc = self.statuses.get(msg.hyperjob) or domain.AggregateDoc(name=msg.hyperjob)
        self.statuses.put(msg.hyperjob, replace(doc, waiting_reason=msg.reason))
        self.dirty.add(msg.hyperjob)

    def on_reservation(self, msg: events.ReservationHeld) -> Reaction | None:
        """A cluster holds (or lost) a cross-cluster gang member's reservation: only counted."""
        return _counted(m.GANG_RESERVATIONS.labels(msg.cluster, "held" if msg.held else "lost").inc)

    def on_gang_retry(self, msg: events.GangRetry) -> Reaction | None:
        """A gang attempt released because not every member held in time: only counted (a plan
        asked again for room elsewhere released no reservation)."""
        if msg.reason.startswith(fleetcore.ROOM_RETRY):
            return None
        return _counted(m.GANG_RESERVATIONS.labels("", "released").inc)

    def on_deleted(self, msg: events.HyperJobDeleted | events.HyperJobSpecChanged) -> None:
        self.specs.delete(msg.name)
        self.statuses.delete(msg.name)
        self.early.delete(msg.name)
        self.dirty.discard(msg.name)
        self.owners = {child: owner for child, owner in self.owners.items() if owner != msg.name}

    def flush(self) -> Reaction | None:
        """The status of every HyperJob this unit touched; a change is announced."""
        reaction = Reaction()
        for name in sorted(self.dirty):
            spec = self.specs.get(name)
            if spec is None:
                continue
            doc = self.statuses.get(name) or domain.AggregateDoc(name=name)
            new = domain.recompute(doc, spec, self.rt.now())
            if new == doc:
                continue
            if new.phase == "Running" and doc.phase != "Running" and not new.reached_running:
                new = replace(new, reached_running=True)
                if spec.created:
                    latency = max(0.0, self.rt.now() - spec.created)
                    reaction.extend(_counted(functools.partial(m.SUBMIT_TO_RUNNING.observe, latency)))
            self.statuses.put(name, new)
            if (new.phase, new.status) != (doc.phase, doc.status):
                with self.rt.span("status", name, hyperjob=name, phase=new.phase):
                    if new.phase != doc.phase:
                        reason = str(new.status.get("waitingReason", "")) if isinstance(new.status, dict) else ""
                        decision("hyperjob_phase_changed", hyperjob=name, old=doc.phase, new=new.phase, reason=reason)
                    reaction.publish(
                        subjects.HYPERJOB_STATUS,
                        events.HyperJobStatusChanged(
                            **self.rt.envelope(name, f"status/{self.rt.now()!r}/{new.phase}/{hash_of(new.status)}"),
                            name=name,
                            phase=new.phase,
                            status=new.status,
                        ),
                    )
        self.dirty.clear()
        return reaction


def _counted(*changes: Callable[[], object]) -> Reaction | None:
    """A reaction that changes the metrics once its unit of work committed (never on a retry)."""
    if not changes:
        return None

    async def count() -> None:
        for change in changes:
            change()

    after: list[Callable[[], Awaitable[None]]] = [count]
    return Reaction(after=after)


def hash_of(status: dict[str, object]) -> str:
    return hashlib.sha1(msgspec.json.encode(status)).hexdigest()[:16]
