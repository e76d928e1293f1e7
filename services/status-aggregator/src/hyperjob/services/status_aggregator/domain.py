"""The aggregator's documents and how news changes a status (pure)."""

from __future__ import annotations

from typing import cast

import msgspec
from msgspec.structs import replace

from hyperjob import api, events, fleetcore

# The waiting reasons' codes are the fleet's (its Events say them too): re-exported for the metrics.
from hyperjob.fleetcore.waiting import WAITING_REASONS as WAITING_REASONS
from hyperjob.fleetcore.waiting import waiting_reason_code as waiting_reason_code


class SpecDoc(msgspec.Struct, frozen=True, kw_only=True):
    """What the aggregator knows of a HyperJob from the splitter (``HyperJobSpecChanged``), and
    whether its queue admitted it (``OwnerAdmitted``)."""

    name: str
    manifest: dict[str, object] = {}
    plain: bool = False
    generation: int = 1
    children: list[events.ChildRef] = []
    lifecycle: str = "Active"
    restarts: int = 0
    deleting: bool = False
    waiting_reason: str = ""
    admitted: bool = False
    attempt: int = 1
    created: float = 0.0  # when the splitter accepted it (submit→Running latency starts here)


class AggregateDoc(msgspec.Struct, frozen=True, kw_only=True):
    """``records.HyperJobStatusDoc`` plus what the aggregation needs: the latest news of each child."""

    name: str
    phase: str = "Pending"
    status: dict[str, object] = {}
    updated_at: float = 0.0
    # The latest news of each child on each cluster (``news_key``): a child that moved has a copy
    # on the cluster it left, whose news (it terminates once that cluster is back) is not the child's.
    children: dict[str, fleetcore.ChildStatus] = {}
    attempts: dict[str, int] = {}  # the plan attempt each child's news is about (same keys)
    # Each waiting child's podgroup Unschedulable message, from its cluster's scheduler (same keys).
    unschedulable: dict[str, str] = {}
    waiting_reason: str = ""
    restarts: int = 0  # the owner's restart count this status reflects
    lifecycle: str = "Active"  # the owner's lifecycle as settled on this status's view of the children
    reached_running: bool = False  # Running once already: its submit→Running latency is counted
    # Children an update replaces in place (same name, same cluster, another template), by news
    # key: until the replacement is created, news under that key is of the child being removed.
    replaced: list[str] = []


# How long news of a HyperJob whose spec never came is kept: news that outlived its HyperJob (it
# came after the delete) is garbage, while a spec held up by a killed instance comes back within
# the specs consumer's ack wait (seconds). An hour is far beyond that.
EARLY_NEWS_TTL = 3600.0


class EarlyNewsDoc(msgspec.Struct, frozen=True, kw_only=True):
    """Children's news of a HyperJob whose spec this service has not seen yet: the spec and the
    news travel on different consumers, so after a restart the news can come first. Kept until the
    spec comes (and folded in then), the HyperJob is deleted, or ``EARLY_NEWS_TTL`` passes."""

    name: str
    news: dict[str, events.JobPhaseChanged] = {}  # the latest of each child, by ``news_key``
    kept_at: float = 0.0


def keep_early(doc: EarlyNewsDoc | None, msg: events.JobPhaseChanged, now: float) -> EarlyNewsDoc:
    doc = doc or EarlyNewsDoc(name=msg.hyperjob)
    key = news_key(msg.job, msg.cluster)
    latest = doc.news.get(key)
    if latest is not None and latest.occurred_at > msg.occurred_at:
        return replace(doc, kept_at=now)  # a redelivery of older news
    return replace(doc, news={**doc.news, key: msg}, kept_at=now)


def early_news_of(doc: EarlyNewsDoc, created: float) -> list[events.JobPhaseChanged]:
    """The news to fold once the spec came, oldest first: only news from after the HyperJob was
    accepted, since news of an earlier HyperJob of the same name (deleted, then created again)
    is not about this one."""
    return sorted((msg for msg in doc.news.values() if msg.occurred_at >= created), key=lambda m: m.occurred_at)


def expired(doc: EarlyNewsDoc, now: float) -> bool:
    return now - doc.kept_at > EARLY_NEWS_TTL


def spec_changed(current: SpecDoc | None, msg: events.HyperJobSpecChanged) -> SpecDoc:
    return SpecDoc(
        name=msg.name,
        manifest=msg.manifest,
        plain=msg.plain,
        generation=msg.generation,
        children=list(msg.children),
        lifecycle=msg.lifecycle,
        restarts=msg.restarts,
        deleting=msg.deleting,
        waiting_reason=msg.waiting_reason,
        admitted=current.admitted if current else False,
        attempt=msg.attempt,
        created=msg.created or (current.created if current else msg.occurred_at),
    )


def failovers(old: list[events.ChildRef], new: list[events.ChildRef]) -> list[tuple[str, str]]:
    """(from cluster, to cluster) of each child the new plan moved off the cluster it was on; a
    child withdrawn to wait for a cluster goes to ``"none"``."""
    before = {ref.name: ref.cluster for ref in old if ref.cluster}
    return [
        (before[ref.name], ref.cluster or "none")
        for ref in new
        if ref.name in before and before[ref.name] != ref.cluster
    ]


def news_key(child: str, cluster: str) -> str:
    return f"{child}@{cluster}"


def replaced_in_place(old: list[events.ChildRef], new: list[events.ChildRef]) -> list[str]:
    """The news keys of the children a new plan replaces where they are: same name and cluster,
    another template (the splitter removes the running one and creates the new one)."""
    before = {(ref.name, ref.cluster): ref.template_hash for ref in old if ref.cluster}
    return sorted(
        news_key(ref.name, ref.cluster)
        for ref in new
        if (ref.name, ref.cluster) in before and before[(ref.name, ref.cluster)] != ref.template_hash
    )


def forget_replaced(doc: AggregateDoc, keys: list[str]) -> AggregateDoc:
    """The replaced children's news is dropped, and what follows under their keys is the old
    child's ending (a replacement asked for by an update, not a failure) until the new one exists."""
    if not keys:
        return doc
    return replace(
        doc,
        children={k: v for k, v in doc.children.items() if k not in keys},
        attempts={k: v for k, v in doc.attempts.items() if k not in keys},
        unschedulable={k: v for k, v in doc.unschedulable.items() if k not in keys},
        replaced=sorted(set(doc.replaced) | set(keys)),
    )


def of_replaced_child(doc: AggregateDoc, msg: events.JobPhaseChanged) -> bool:
    """News of a child being replaced in place: anything under its key but the new child's first
    news (a job's creation is the only news with no old phase)."""
    return news_key(msg.job, msg.cluster) in doc.replaced and msg.old != ""


def child_news(msg: events.JobPhaseChanged) -> fleetcore.ChildStatus:
    counts = msg.counts
    return fleetcore.ChildStatus(
        name=msg.job,
        replicated_job=msg.replicated_job,
        cluster=msg.cluster,
        phase=msg.new,
        reason=msg.reason,
        last_transition_time=msg.occurred_at,
        replicas=counts.pending + counts.running + counts.succeeded + counts.failed + counts.terminating,
        **msgspec.structs.asdict(counts),
    )


def recompute(doc: AggregateDoc, spec: SpecDoc, now: float) -> AggregateDoc:
    """Fold the children the plan has now (unknown ones Pending) into the HyperJob status."""
    hyperjob = api.expect_kind(api.decode_stored(spec.manifest), api.HyperJob)
    hyperjob = replace(hyperjob, metadata=replace(hyperjob.metadata, generation=spec.generation))
    children = [_child_status(doc, ref, spec.attempt) for ref in spec.children]
    # After a restart (or a suspend or resume) the old conditions no longer hold: the status starts
    # over. Children's news and the owner's commands travel on different streams, so a child that a
    # suspend aborted may be heard of before the suspend itself: its condition must not stick.
    phases = {child.name: child.phase for child in children}
    lifecycle = "Terminating" if spec.deleting else fleetcore.settle_lifecycle(_unsettled(spec, doc), phases)
    restarted = spec.restarts != doc.restarts or lifecycle != doc.lifecycle
    previous = msgspec.convert(doc.status, fleetcore.HyperJobStatus) if doc.status and not restarted else None
    # A child only ever leaves Pending after its owner was admitted.
    admitted = spec.admitted or any(child.phase != "Pending" for child in children)
    status = fleetcore.aggregate_status(
        hyperjob,
        children,
        previous=previous,
        lifecycle=lifecycle,
        admitted=admitted,
        waiting_reason=spec.waiting_reason or doc.waiting_reason,
        now=now,
    )
    return replace(
        doc,
        phase=status.phase,
        status=msgspec.to_builtins(status),
        updated_at=now,
        restarts=spec.restarts,
        lifecycle=lifecycle,
    )


def _child_status(doc: AggregateDoc, ref: events.ChildRef, attempt: int) -> fleetcore.ChildStatus:
    """The child as the plan places it: the news from its cluster, if of the plan in force."""
    key = news_key(ref.name, ref.cluster)
    news = doc.children.get(key) if ref.cluster else None
    message = doc.unschedulable.get(key, "") if ref.cluster else ""
    if news is not None and _of_current_plan(doc.attempts.get(key, 0), attempt):
        return replace(news, replicas=ref.replicas, message=message)
    return fleetcore.ChildStatus(
        name=ref.name, replicated_job=ref.replicated_job, cluster=ref.cluster, replicas=ref.replicas, message=message
    )


def podgroup_news(doc: AggregateDoc, msg: events.PodGroupPhaseChanged) -> AggregateDoc:
    """The child's podgroup waits with ``msg.reason`` (Volcano's Unschedulable condition), or no
    longer waits."""
    key = news_key(msg.job, msg.cluster)
    unschedulable = {k: v for k, v in doc.unschedulable.items() if k != key}
    if msg.reason:
        unschedulable[key] = msg.reason
    return replace(doc, unschedulable=unschedulable)


def _unsettled(spec: SpecDoc, doc: AggregateDoc) -> fleetcore.Lifecycle:
    """The lifecycle to settle on this status's own view of the children. The splitter settles a
    resume or restart (back to Active) on the child news it has seen, which this service may not
    have seen yet (another consumer of the same stream): until it has, the children it last heard
    of as Aborted are still coming back, not failed."""
    # The event carries the splitter's ``records.Lifecycle`` (a subset of fleetcore's) as a string.
    lifecycle = cast("fleetcore.Lifecycle", spec.lifecycle)
    if lifecycle != "Active":
        return lifecycle
    if doc.lifecycle in ("Suspended", "Resuming"):
        return "Resuming"
    if spec.restarts != doc.restarts or doc.lifecycle == "Restarting":
        return "Restarting"
    return lifecycle


def _of_current_plan(attempt: int, current: int) -> bool:
    """News about a child is about the plan in force unless it names an earlier attempt (0: news
    that names none, about whichever child of that name there is)."""
    return attempt == 0 or attempt >= current
