"""What the status-aggregator needs of each HyperJob's spec: one ``HyperJobSpecChanged`` per
HyperJob a unit of work changed, sent with that unit's commit."""

from __future__ import annotations

import hashlib
from typing import Any, Required, TypedDict

import msgspec

from hyperjob import events, records
from hyperjob.events import subjects
from hyperjob.servicekit import Reaction

from .state import SplitterState


class SpecAnnouncer:
    """Announces the HyperJobs the splitter's units marked (``SplitterState.put``/``drop``).

    Invariants, enforced here:
    - Runs before every commit (``Runtime.before_commit``): a HyperJob changed by a unit of work
      is announced in the same commit, or not at all (its marks are cleared either way).
    - A spec whose content is as last announced is not sent again; what was announced is
      remembered only once the commit succeeded (``Reaction.after``), so a failed commit's
      announcement is made again by the next.
    - A message's id names the document's incarnation and version and its content's digest: a
      redone unit sends the same id (JetStream drops the duplicate), while a spec that returns to
      an earlier content (suspend, then resume) is still a new message.
    """

    def __init__(self, state: SplitterState) -> None:
        self.state = state
        self.rt = state.rt
        self.announced: dict[str, str] = {}  # HyperJob -> the digest of its spec as last announced

    def flush(self) -> Reaction | None:
        """One ``HyperJobSpecChanged`` per HyperJob this unit changed (what the status shows)."""
        if not self.state.dirty:
            return None
        reaction, sent = Reaction(), {}
        for name in sorted(self.state.dirty):
            fields = _spec_fields(name, self.state.hyperjobs.get(name))
            digest = hashlib.sha1(msgspec.json.encode(fields)).hexdigest()
            if self.announced.get(name) != digest:
                sent[name] = digest
                reaction.publish(subjects.HYPERJOB_SPEC, self._spec_changed(fields, digest))
        self.state.dirty.clear()

        async def remember() -> None:
            self.announced.update(sent)

        reaction.after.append(remember)
        return reaction

    def _spec_changed(self, fields: _SpecFields, digest: str) -> events.HyperJobSpecChanged:
        name, doc = fields["name"], self.state.hyperjobs.get(fields["name"])
        # The id names this incarnation and version of the document: a spec that returns to
        # an earlier content (suspend, then resume) is still a new message.
        which = f"{doc.created!r}/{self.state.hyperjobs.versions.get(name, 0)}" if doc else f"gone/{self.rt.now()!r}"
        return events.HyperJobSpecChanged(
            event_id=events.derive_id(name, f"spec/{which}/{digest}"),
            occurred_at=self.rt.now(),
            producer=self.rt.service,
            **fields,
        )


class _SpecFields(TypedDict, total=False):
    """``events.HyperJobSpecChanged``'s own fields (its digest says whether it changed)."""

    name: Required[str]
    manifest: Required[dict[str, Any]]
    plain: bool
    generation: int
    created: float
    children: list[events.ChildRef]
    world_size: int
    lifecycle: str
    restarts: int
    deleting: bool
    waiting_reason: str
    attempt: int


def _spec_fields(name: str, doc: records.HyperJobDoc | None) -> _SpecFields:
    if doc is None:
        return {"name": name, "manifest": {}, "deleting": True, "lifecycle": "Active"}
    return {
        "name": name,
        "manifest": doc.manifest,
        "plain": doc.plain,
        "generation": doc.generation,
        "created": doc.created,
        "children": doc.children,
        "world_size": doc.world_size,
        "lifecycle": doc.lifecycle,
        "restarts": doc.restarts,
        "deleting": doc.deleting,
        "waiting_reason": doc.waiting_reason,
        "attempt": doc.attempt,
    }
