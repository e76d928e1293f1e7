"""Folding child news into HyperJob statuses, once per HyperJob and unit of work."""

from __future__ import annotations

import hashlib

import msgspec
from msgspec.structs import replace

from hyperjob import events, records
from hyperjob.events import subjects
from hyperjob.servicekit import Reaction, Runtime

from . import domain


class StatusAggregator:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.specs = runtime.table(records.HYPERJOB_SPEC, domain.SpecDoc)
        self.statuses = runtime.table(records.HYPERJOB_STATUS, domain.AggregateDoc)
        self.dirty: set[str] = set()
        runtime.on_load(self.dirty.clear)

    def on_spec(self, msg: events.HyperJobSpecChanged) -> None:
        if msg.plain:
            return  # a plain Job: its own record is its status
        if not msg.manifest:  # gone
            self.specs.delete(msg.name)
            self.statuses.delete(msg.name)
            self.dirty.discard(msg.name)
            return
        self.specs.put(msg.name, domain.spec_changed(self.specs.get(msg.name), msg))
        self.dirty.add(msg.name)

    def on_admitted(self, msg: events.OwnerAdmitted) -> None:
        """Admitted: what its queue made it wait for no longer holds."""
        spec = self.specs.get(msg.name)
        if spec is not None and not spec.admitted:
            self.specs.put(msg.name, replace(spec, admitted=True))
            doc = self.statuses.get(msg.name)
            if doc is not None and doc.waiting_reason:
                self.statuses.put(msg.name, replace(doc, waiting_reason=""))
            self.dirty.add(msg.name)

    def on_job_phase(self, msg: events.JobPhaseChanged) -> None:
        if not msg.hyperjob or msg.hyperjob not in self.specs:
            return
        doc = self.statuses.get(msg.hyperjob) or domain.AggregateDoc(name=msg.hyperjob)
        key = domain.news_key(msg.job, msg.cluster)
        if msg.attempt and msg.attempt < doc.attempts.get(key, 0):
            return  # news of the child an earlier plan attempt dispatched, arriving late
        self.statuses.put(
            msg.hyperjob,
            replace(
                doc,
                children={**doc.children, key: domain.child_news(msg)},
                attempts={**doc.attempts, key: msg.attempt},
            ),
        )
        self.dirty.add(msg.hyperjob)

    def on_waiting(self, msg: events.ChildPlacementWaiting) -> None:
        if not msg.hyperjob or msg.hyperjob not in self.specs:
            return
        doc = self.statuses.get(msg.hyperjob) or domain.AggregateDoc(name=msg.hyperjob)
        self.statuses.put(msg.hyperjob, replace(doc, waiting_reason=msg.reason))
        self.dirty.add(msg.hyperjob)

    def on_deleted(self, msg: events.HyperJobDeleted) -> None:
        self.specs.delete(msg.name)
        self.statuses.delete(msg.name)
        self.dirty.discard(msg.name)

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
            self.statuses.put(name, new)
            if (new.phase, new.status) != (doc.phase, doc.status):
                reaction.publish(
                    subjects.HYPERJOB_STATUS,
                    self.rt.emit(
                        events.HyperJobStatusChanged,
                        name,
                        f"status/{self.rt.now()!r}/{new.phase}/{hash_of(new.status)}",
                        name=name,
                        phase=new.phase,
                        status=new.status,
                    ),
                )
        self.dirty.clear()
        return reaction


def hash_of(status: dict[str, object]) -> str:
    return hashlib.sha1(msgspec.json.encode(status)).hexdigest()[:16]
