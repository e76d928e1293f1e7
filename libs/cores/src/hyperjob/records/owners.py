"""Which kinds of document each role writes (the table in ``records``' docstring, as data): what
a service's store user may touch, and nothing else. ``{cluster}`` and ``{instance}`` are the
instance's cluster and name."""

from __future__ import annotations

KINDS_BY_ROLE: dict[str, tuple[str, ...]] = {
    "splitter": ("hyperjob", "queue", "priorityclass"),
    "global-scheduler": ("owner", "placement", "gang"),
    "status-aggregator": ("hjspec", "hjstatus"),
    "cluster-scheduler": ("pgphase@{cluster}", "reservation@{cluster}", "queueusage@{cluster}", "preempt@{cluster}"),
    "job-controller": ("job@{cluster}", "child@{cluster}", "podgroup@{cluster}", "lease@{cluster}"),
    "node-agent": ("agentpod@{instance}", "agentdown@{instance}"),
    "workflow-controller": ("cronjob", "jobflow", "jobtemplate"),
}
# Node bookings (``binding@<cluster>``, node allocatable and usage) are the cluster-scheduler's.
BOOKS_NODES = frozenset({"cluster-scheduler"})


def kinds_of(role: str, *, cluster: str = "", instance: str = "") -> tuple[str, ...]:
    return tuple(k.replace("{cluster}", cluster).replace("{instance}", instance) for k in KINDS_BY_ROLE[role])
