"""Why something waits, as a code: the status-aggregator's metrics and the Events of the event log
(``hyperjob.client.eventlog``) name a waiting message's reason the same way."""

from __future__ import annotations

# Why something waits, as a short CamelCase reason (Kubernetes Events' ``reason``, the
# ``hyperjob_pending_hyperjobs{reason}`` label): the first rule whose words the message holds.
WAITING_REASONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Inadmissible", ("inadmissible",)),
    ("NodeFault", ("evicted from notready node",)),
    # A child's podgroup, in its cluster's scheduler's words (whatever limit it names).
    ("Unschedulable", ("tasks in gang unschedulable", "nodes are available")),
    ("QueueLimit", ("queue ", "fleet ", "not yet promised", "capability")),
    ("ClusterLost", ("lost", "not live", "silent", "failover")),
    ("GangNotHeld", ("cross-cluster gang", "reservation", "whole gang")),  # not "gang": a name may hold it
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
