"""The aggregator's documents and how news changes a status (pure)."""

from __future__ import annotations

import msgspec
from msgspec.structs import replace

from hyperjob import api, events, fleetcore


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
    waiting_reason: str = ""
    restarts: int = 0  # the owner's restart count this status reflects
    lifecycle: str = "Active"  # the owner's lifecycle as settled on this status's view of the children
    reached_running: bool = False  # Running once already: its submit→Running latency is counted


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


# Why something waits, as a short CamelCase reason (Kubernetes Events' ``reason``, the
# ``hyperjob_pending_hyperjobs{reason}`` label): the first rule whose words the message holds.
WAITING_REASONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("QueueLimit", ("queue ", "fleet ", "not yet promised", "capability")),
    ("ClusterLost", ("lost", "not live", "silent", "failover")),
    ("GangNotHeld", ("gang", "reservation", "hold")),
    ("NameConflict", ("already exists", "previous child of this name")),
    ("Unschedulable", ("lacks", "cannot fit", "no cluster", "no live cluster", "no eligible", "never host",
                       "node selector", "maxdomains", "insufficient", "fit")),
)  # fmt: skip


def waiting_reason_code(message: str) -> str:
    """The reason code of a waiting message (``Waiting`` when no rule names it, ``""`` for none)."""
    if not message:
        return ""
    lowered = message.lower()
    return next((code for code, words in WAITING_REASONS if any(w in lowered for w in words)), "Waiting")


def failovers(old: list[events.ChildRef], new: list[events.ChildRef]) -> list[tuple[str, str]]:
    """(from cluster, to cluster) of each child the new plan moved off the cluster it was on; a
    child withdrawn to wait for a cluster goes to ``"none"``."""
    before = {ref.name: ref.cluster for ref in old if ref.cluster}
    return [
        (before[ref.name], ref.cluster or "none")
        for ref in new
        if ref.name in before and before[ref.name] != ref.cluster
    ]
