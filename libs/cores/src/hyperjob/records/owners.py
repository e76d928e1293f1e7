"""Which kinds of document each role writes (the table in ``records``' docstring, as data): what
a service's store user may touch, and nothing else. ``{cluster}`` and ``{instance}`` are the
instance's cluster and name."""

from __future__ import annotations

KINDS_BY_ROLE: dict[str, tuple[str, ...]] = {
    "splitter": ("hyperjob", "queue", "priorityclass"),
    "global-scheduler": ("owner", "placement", "gang"),
    "status-aggregator": ("hjspec", "hjstatus", "hjearly"),
    "cluster-scheduler": ("pgphase@{cluster}", "reservation@{cluster}", "queueusage@{cluster}", "preempt@{cluster}"),
    "job-controller": ("job@{cluster}", "child@{cluster}", "podgroup@{cluster}", "lease@{cluster}"),
    "node-agent": ("agentpod@{instance}", "agentdown@{instance}"),
    "workflow-controller": ("cronjob", "jobflow", "jobtemplate"),
}
# Node bookings (``binding@<cluster>``, node allocatable and usage) are the cluster-scheduler's.
BOOKS_NODES = frozenset({"cluster-scheduler"})


def kinds_of(role: str, *, cluster: str = "", instance: str = "") -> tuple[str, ...]:
    return tuple(k.replace("{cluster}", cluster).replace("{instance}", instance) for k in KINDS_BY_ROLE[role])


def _writers() -> dict[str, str]:
    """``KINDS_BY_ROLE`` read backwards: a kind (its scope as ``{cluster}``/``{instance}``) -> role."""
    return {kind: role for role, kinds in KINDS_BY_ROLE.items() for kind in kinds}


_WRITERS = _writers()


def owner_of(kind: str) -> str:
    """The instance that writes ``kind`` (``instance_name``'s naming): a fleet kind's role
    (``hyperjob`` -> ``splitter``), a per-cluster kind's ``<role>-<cluster>`` (``job@c1`` ->
    ``job-controller-c1``), a per-instance kind's instance, a cluster's bindings its booker. A kind
    no role declares (tests, tools) is its own owner."""
    base, at, scope = kind.partition("@")
    if not at:
        return _WRITERS.get(kind, kind)
    if base == "binding":
        return booker_of(scope)
    if role := _WRITERS.get(f"{base}@{{cluster}}"):
        return f"{role}-{scope}"
    if f"{base}@{{instance}}" in _WRITERS:
        return scope
    return kind


def booker_of(cluster: str) -> str:
    """The instance that books ``cluster``'s nodes (its bindings, allocatable and usage)."""
    return f"cluster-scheduler-{cluster}"
