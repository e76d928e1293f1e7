"""The aggregator's document and how one child's news changes it (pure)."""

from __future__ import annotations

import msgspec
from msgspec.structs import replace

import api
import fleetcore
import records


class AggregateDoc(msgspec.Struct, frozen=True, kw_only=True):
    """``records.HyperJobStatusDoc`` plus what the aggregation needs: the latest news of each child."""

    name: str
    phase: str = "Pending"
    status: dict[str, object] = {}
    updated_at: float = 0.0
    children: dict[str, fleetcore.ChildStatus] = {}
    waiting_reason: str = ""
    restarts: int = 0  # the owner's restart count this status reflects


def child_changed(doc: AggregateDoc, news: fleetcore.ChildStatus) -> AggregateDoc:
    return replace(doc, children={**doc.children, news.name: news})


def recompute(doc: AggregateDoc, owner: records.HyperJobDoc, admitted: bool, now: float) -> AggregateDoc:
    """Fold the children the plan has now (unknown ones Pending) into the HyperJob status."""
    hyperjob = api.decode(owner.manifest)
    assert isinstance(hyperjob, api.HyperJob)
    hyperjob = replace(hyperjob, metadata=replace(hyperjob.metadata, generation=owner.generation))
    children = [replace(doc.children[ref.name], replicas=ref.replicas) if ref.name in doc.children
                else fleetcore.ChildStatus(name=ref.name, replicated_job=ref.replicated_job, cluster=ref.cluster,
                                           replicas=ref.replicas)
                for ref in owner.children]
    # After a restart the old conditions no longer hold: the status starts over.
    restarted = owner.restarts != doc.restarts
    previous = msgspec.convert(doc.status, fleetcore.HyperJobStatus) if doc.status and not restarted else None
    phases = {child.name: child.phase for child in children}
    lifecycle = "Terminating" if owner.deleting else fleetcore.settle_lifecycle(owner.lifecycle, phases)  # type: ignore[arg-type]
    # A child only ever leaves Pending after its owner was admitted (the admission record itself
    # goes away once the children finish).
    admitted = admitted or any(child.phase != "Pending" for child in children)
    status = fleetcore.aggregate_status(hyperjob, children, previous=previous, lifecycle=lifecycle, admitted=admitted,
                                        waiting_reason=owner.waiting_reason or doc.waiting_reason, now=now)
    return replace(doc, phase=status.phase, status=msgspec.to_builtins(status), updated_at=now, restarts=owner.restarts)
