"""Kubernetes-style Events (``hyperjob get events``, ``describe``'s Events section), read from the
system's own event log: the messages the services exchanged, kept on the JetStream streams.

Each message of interest becomes one or more events on the objects it concerns (``HyperJob``,
``Job``, ``PodGroup``, ``Queue``, ``Node``): a type (``Normal`` or ``Warning``), a short CamelCase
reason, a message, and when. An event belongs to its object's namespace (ADR 0009): a HyperJob's
from its key, a Job's (and its podgroup's) from the manifest it was dispatched with or its
HyperJob, or else from what the store knows; cluster-scoped objects' are listed in ``default``.
As Kubernetes does, repeats of the same (object, type, reason, message) fold into one event with
a count and first/last times. Nothing here writes: the log is
what the services already publish (``events.subjects.STREAMS`` keep 7 days), so the Events show
what the system did, in its own words, without a tracing backend.

``derive`` is pure (a list of (message, time) in stream order → events); ``load`` reads the log.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Protocol

import msgspec

from hyperjob import api, events
from hyperjob.api.quantity import format_quantity
from hyperjob.bus.protocol import Bus
from hyperjob.fleetcore.waiting import waiting_reason_code

# What is read: the subjects whose messages say what happened to an object (not the bulky or
# per-pod ones: pod starts, phases reported by agents, telemetry, heartbeats).
SUBJECTS = (
    "hj.hyperjob.status",
    "hj.hyperjob.deleted",
    "sched.owner.submitted",
    "sched.owner.admitted",
    "sched.owner.lifecycle",
    "sched.child.waiting",
    "sched.child.move",
    "sched.child.dispatch.*",
    "sched.gang.retry",
    "sched.gang.control.*",  # the fleet's PreemptForGang (Preempting, Preempted)
    "sched.reservation.held",
    "sched.podgroup.phase.*",
    "sched.pods.*.*",
    "job.phase.*",
    "job.removed.*",
    "node.fault.*",
    "nodestatus.*.*",
)
# Object kinds as ``get events KIND/NAME`` and ``describe`` name them.
KINDS = {
    "hyperjob": "HyperJob",
    "hj": "HyperJob",
    "job": "Job",
    "vcjob": "Job",
    "podgroup": "PodGroup",
    "pg": "PodGroup",
    "queue": "Queue",
    "q": "Queue",
    "node": "Node",
    "no": "Node",
}
WARNING_PHASES = ("Failed", "Aborted", "Terminated")

_DECODER = events.decoder(*events.ALL_MESSAGES)


PodsMessage = events.PodsBound | events.PodsEvicted | events.PodsRejected


class Stored(Protocol):
    """A message as the log stores it (a ``Delivery``; tests use a stand-in)."""

    @property
    def data(self) -> bytes: ...


class Event(msgspec.Struct, kw_only=True):
    """One Event, core v1 Event's fields under our names (ADR 0009). ``name`` is the object's own
    name; ``namespace`` its namespace ("" for a cluster-scoped kind); ``hyperjob`` the key
    (``api.object_key``) of the HyperJob it belongs to."""

    kind: str
    name: str
    type: str
    reason: str
    message: str
    first: float
    last: float
    count: int = 1
    cluster: str = ""
    hyperjob: str = ""  # the HyperJob the object belongs to (its child jobs' events show on it)
    namespace: str = ""

    @property
    def object(self) -> str:
        return f"{self.kind.lower()}/{self.name}"

    @property
    def listed_in(self) -> str:
        """The namespace the Event is listed in: its object's, ``default`` for a cluster-scoped
        object (as Kubernetes records a Node's)."""
        return self.namespace or api.DEFAULT_NAMESPACE


def _event(
    kind: str,
    name: str,
    reason: str,
    message: str,
    at: float,
    warning: bool = False,
    *,
    cluster: str = "",
    hyperjob: str = "",
) -> Event:
    return Event(
        kind=kind,
        name=name,
        type="Warning" if warning else "Normal",
        reason=reason,
        message=message,
        first=at,
        last=at,
        cluster=cluster,
        hyperjob=hyperjob,
    )


class _Fold:
    """What deriving remembers across messages: each HyperJob's last phase (a status event is
    published on every count change; only phase changes are events) and each owner's queue."""

    def __init__(self) -> None:
        self.phases: dict[str, str] = {}
        self.queues: dict[str, str] = {}
        self.owners: dict[str, str] = {}  # child job → its HyperJob
        self.waiting: dict[str, str] = {}  # HyperJob → the waiting reason its last status gave
        self.plain: set[str] = set()  # owners that are plain Jobs, not HyperJobs
        self.namespaces: dict[str, str] = {}  # job → its namespace, where a message said it
        self.applied: dict[str, str] = {}  # a plain Job's fleet name → the name it was applied under

    def owner_kind(self, name: str) -> str:
        return "Job" if name in self.plain else "HyperJob"

    def place(self, event: Event, known: Mapping[str, str], names: Mapping[str, str]) -> None:
        """Put ``event`` in its object's namespace, its name the object's own (a HyperJob is
        named by its key in messages, a plain Job by its fleet name, ADR 0010); ``known``: job →
        namespace and ``names``: fleet name → applied name, for jobs no message placed."""
        if event.kind == "HyperJob":
            event.namespace, event.name = api.split_key(event.name)
        elif event.kind in ("Job", "PodGroup"):
            event.namespace = self.namespaces.get(event.name) or known.get(event.name) or api.DEFAULT_NAMESPACE
            event.name = self.applied.get(event.name) or names.get(event.name) or event.name

    def of(self, message: events.Message, at: float) -> Iterator[Event]:
        handler = getattr(self, f"_{type(message).__name__}", None)
        if handler is not None:
            yield from handler(message, at)

    def _HyperJobStatusChanged(self, m: events.HyperJobStatusChanged, at: float) -> Iterator[Event]:
        """A phase change; and a Warning, coded as the metrics code it, each time it waits for a
        new reason (the splitter's, its queue's, or a child's cluster's)."""
        reason = str(m.status.get("waitingReason", "")) if isinstance(m.status, dict) else ""
        told, self.waiting[m.name] = self.waiting.get(m.name, ""), reason
        before = self.phases.get(m.name, "")
        if before != m.phase:
            self.phases[m.name] = m.phase
            text = f"phase {before} → {m.phase}" if before else f"phase {m.phase}"
            yield _event(
                "HyperJob",
                m.name,
                m.phase,
                f"{text}: {reason}" if reason else text,
                at,
                m.phase in WARNING_PHASES,
                hyperjob=m.name,
            )
        if reason and reason != told:
            yield _event("HyperJob", m.name, waiting_reason_code(reason), reason, at, True, hyperjob=m.name)

    def _HyperJobDeleted(self, m: events.HyperJobDeleted, at: float) -> Iterator[Event]:
        yield _event("HyperJob", m.name, "Deleted", "deleted, with every child on every cluster", at, hyperjob=m.name)

    def _OwnerSubmitted(self, m: events.OwnerSubmitted, at: float) -> Iterator[Event]:
        if m.plain:
            self.plain.add(m.name)
        kind = self.owner_kind(m.name)
        self.queues[m.name] = m.queue
        asks = ", ".join(f"{k}={format_quantity(k, v)}" for k, v in sorted(m.request.items()))
        yield _event(kind, m.name, "Submitted", f"asks queue {m.queue} for {asks}", at, hyperjob=m.name)
        yield _event("Queue", m.queue, "Submitted", f"{kind.lower()}/{m.name} asks for {asks}", at)

    def _OwnerAdmitted(self, m: events.OwnerAdmitted, at: float) -> Iterator[Event]:
        kind = self.owner_kind(m.name)
        yield _event(kind, m.name, "Admitted", f"admitted by queue {m.queue}", at, hyperjob=m.name)
        yield _event("Queue", m.queue, "Admitted", f"{m.name} admitted", at)

    def _OwnerLifecycle(self, m: events.OwnerLifecycle, at: float) -> Iterator[Event]:
        kind = self.owner_kind(m.name)
        yield _event(kind, m.name, m.lifecycle, f"lifecycle {m.lifecycle}", at, hyperjob=m.name)

    def _ChildPlacementWaiting(self, m: events.ChildPlacementWaiting, at: float) -> Iterator[Event]:
        code = waiting_reason_code(m.reason)
        owner = m.hyperjob or m.child
        if m.child and m.hyperjob:
            yield _event("Job", m.child, code, m.reason, at, True, hyperjob=m.hyperjob)
        else:
            yield _event("Job" if not m.hyperjob else "HyperJob", owner, code, m.reason, at, True, hyperjob=owner)
        if code == "QueueLimit" and owner in self.queues:
            yield _event("Queue", self.queues[owner], code, f"{owner}: {m.reason}", at, True)

    def _MoveChild(self, m: events.MoveChild, at: float) -> Iterator[Event]:
        where = f"moved to cluster {m.to_cluster}" if m.to_cluster else "withdrawn to wait for a cluster"
        text = f"{where}: {m.reason}" if m.reason else where
        yield _event("Job", m.child, "Failover", text, at, True, hyperjob=self.owners.get(m.child, ""))

    def _DispatchChild(self, m: events.DispatchChild, at: float) -> Iterator[Event]:
        if m.hyperjob:
            self.owners[m.child] = m.hyperjob
        metadata = m.job.get("metadata")
        if isinstance(metadata, dict) and isinstance(metadata.get("namespace"), str):
            self.namespaces[m.child] = metadata["namespace"]
        if isinstance(metadata, dict) and not m.hyperjob:
            applied = (metadata.get("annotations") or {}).get(api.APPLIED_NAME_ANNOTATION)
            if isinstance(applied, str) and applied:
                self.applied[m.child] = applied
        text = f"dispatched to cluster {m.cluster}" + (f" (gang attempt {m.gang_attempt})" if m.gang else "")
        yield _event("Job", m.child, "Dispatched", text, at, cluster=m.cluster, hyperjob=m.hyperjob)

    def _GangRetry(self, m: events.GangRetry, at: float) -> Iterator[Event]:
        text = f"gang attempt {m.attempt - 1} released, planning attempt {m.attempt}: {m.reason}"
        yield _event("HyperJob", m.owner, "GangRetry", text, at, True, hyperjob=m.owner)

    def _PreemptForGang(self, m: events.PreemptForGang, at: float) -> Iterator[Event]:
        victims = ", ".join(f"{v.job} ({len(v.pods)} pods)" for v in m.victims)
        text = f"cluster {m.cluster} evicts {victims}: {m.reason}"
        yield _event("HyperJob", m.hyperjob, "Preempting", text, at, True, cluster=m.cluster, hyperjob=m.hyperjob)
        for v in m.victims:
            text = f"{len(v.pods)} pods preempted on cluster {m.cluster} for HyperJob {m.hyperjob} (higher priority)"
            yield _event(
                "Job", v.job, "Preempted", text, at, True, cluster=m.cluster, hyperjob=self.owners.get(v.job, "")
            )

    def _ReservationHeld(self, m: events.ReservationHeld, at: float) -> Iterator[Event]:
        reason, text = ("GangHeld", "holds every pod of its gang") if m.held else ("GangLost", "lost its gang's hold")
        yield _event(
            "Job",
            m.child,
            reason,
            f"cluster {m.cluster} {text}",
            at,
            not m.held,
            cluster=m.cluster,
            hyperjob=m.hyperjob,
        )

    def _PodGroupPhaseChanged(self, m: events.PodGroupPhaseChanged, at: float) -> Iterator[Event]:
        waiting = bool(m.reason) and m.phase in ("Pending", "Inqueue", "Unknown")
        # Volcano's condition type, or what took the pods of a job that ran (a node fault).
        reason = (
            ("NodeFault" if waiting_reason_code(m.reason) == "NodeFault" else "Unschedulable") if waiting else m.phase
        )
        text = m.reason if waiting else f"podgroup {m.phase}" + (f": {m.reason}" if m.reason else "")
        yield _event(
            "PodGroup", m.job, reason, text, at, waiting, cluster=m.cluster, hyperjob=self.owners.get(m.job, "")
        )

    def _PodsBound(self, m: events.PodsBound, at: float) -> Iterator[Event]:
        yield self._pods(m, "Scheduled", f"bound {len(m.pods)} pods to {_nodes(m.pods)}", at, False)

    def _PodsEvicted(self, m: events.PodsEvicted, at: float) -> Iterator[Event]:
        why = ", ".join(sorted({p.reason for p in m.pods if p.reason})) or "evicted"
        yield self._pods(m, "Evicted", f"{len(m.pods)} pods evicted from {_nodes(m.pods)}: {why}", at, True)
        for node in sorted({p.node for p in m.pods if p.node}):
            yield _event("Node", node, "Evicted", f"pods of job {m.job} evicted: {why}", at, True, cluster=m.cluster)

    def _PodsRejected(self, m: events.PodsRejected, at: float) -> Iterator[Event]:
        why = ", ".join(sorted({p.reason for p in m.pods if p.reason})) or "rejected"
        yield self._pods(m, "Rejected", f"{len(m.pods)} pods rejected by {_nodes(m.pods)}: {why}", at, True)

    def _pods(self, m: PodsMessage, reason: str, text: str, at: float, warning: bool) -> Event:
        return _event("Job", m.job, reason, text, at, warning, cluster=m.cluster, hyperjob=self.owners.get(m.job, ""))

    def _JobPhaseChanged(self, m: events.JobPhaseChanged, at: float) -> Iterator[Event]:
        if m.old == m.new:
            return
        if m.hyperjob:
            self.owners[m.job] = m.hyperjob
            self.namespaces.setdefault(m.job, api.split_key(m.hyperjob)[0])
        change = f"{m.old} → {m.new}" if m.old else m.new
        text = f"phase {change} on cluster {m.cluster}" + (f": {m.reason}" if m.reason else "")
        yield _event("Job", m.job, m.new, text, at, m.new in WARNING_PHASES, cluster=m.cluster, hyperjob=m.hyperjob)

    def _JobRemoved(self, m: events.JobRemoved, at: float) -> Iterator[Event]:
        text = f"removed from cluster {m.cluster}" + (f": {m.reason}" if m.reason else "")
        owner = m.hyperjob or self.owners.get(m.job, "")
        yield _event("Job", m.job, "Removed", text, at, bool(m.reason), cluster=m.cluster, hyperjob=owner)

    def _InjectNodeFault(self, m: events.InjectNodeFault, at: float) -> Iterator[Event]:
        if m.kind == "pod-exit":
            yield _event("Node", m.node or "-", "PodExit", f"pod {m.pod} made to exit {m.exit_code}", at, True)
            return
        warning = m.kind not in ("clear", "node-up")
        yield _event(
            "Node", m.node, "Fault" if warning else "Recovered", f"{m.kind} injected", at, warning, cluster=m.cluster
        )

    def _NodeStatus(self, m: events.NodeStatus, at: float) -> Iterator[Event]:
        if not m.ready:
            yield _event("Node", m.node, "NodeNotReady", m.reason or "NotReady", at, True, cluster=m.cluster)
        elif m.health_reasons:
            yield _event("Node", m.node, "Unhealthy", "; ".join(m.health_reasons), at, True, cluster=m.cluster)


def _nodes(pods: list[events.PodRef]) -> str:
    nodes = sorted({p.node for p in pods if p.node})
    shown = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
    return f"nodes {shown}" if nodes else "no node"


def derive(
    messages: Iterable[tuple[events.Message, float]],
    known: Mapping[str, str] | None = None,
    names: Mapping[str, str] | None = None,
) -> list[Event]:
    """The events of ``messages`` (each with the time it was stored, in stream order), repeats
    folded into one with a count, oldest first by last occurrence, each in its object's namespace
    under its own name (``known``: job → namespace and ``names``: a plain Job's fleet name → its
    applied name, for the jobs no message places, from the store)."""
    fold = _Fold()
    folded: dict[tuple[str, str, str, str, str], Event] = {}
    for message, at in sorted(messages, key=lambda pair: pair[1]):
        for event in fold.of(message, at):
            key = (event.kind, event.name, event.type, event.reason, event.message)
            seen = folded.get(key)
            if seen is None:
                folded[key] = event
            else:
                seen.count += 1
                seen.last = max(seen.last, event.last)
    for event in folded.values():
        fold.place(event, known or {}, names or {})
    return sorted(folded.values(), key=lambda e: (e.last, e.kind, e.namespace, e.name))


def about(found: list[Event], target: str | None, namespace: str | None = None) -> list[Event]:
    """The events listed in ``namespace`` (None: every namespace) of ``target`` (``KIND/NAME``,
    a bare NAME of any kind, None: every object): for a HyperJob, its child jobs' and podgroups'
    too; for a Job, its podgroup's (named after it, as Volcano does)."""
    listed = [e for e in found if namespace is None or e.listed_in == namespace]
    if not target:
        return listed
    kind_text, _, name = target.rpartition("/")
    kind = KINDS.get(kind_text.lower(), kind_text) if kind_text else ""
    if kind_text and kind not in KINDS.values():
        raise ValueError(f"events are kept for {', '.join(sorted(set(KINDS.values())))}, not {kind_text!r}")
    return [
        e
        for e in listed
        if (e.name == name and (kind in ("", e.kind) or (kind, e.kind) == ("Job", "PodGroup")))
        or (kind == "HyperJob" and e.kind != "Queue" and api.split_key(e.hyperjob) == (e.listed_in, name))
    ]


def decoded(stored: Iterable[tuple[Stored, float]]) -> Iterator[tuple[events.Message, float]]:
    """(message, time) of each stored delivery that decodes; the rest is not an event."""
    for delivery, at in stored:
        message = decode(delivery.data)
        if message is not None:
            yield message, at


def decode(data: bytes) -> events.Message | None:
    """The message stored as ``data``, or None when it is none of ours (or cannot be read at all)."""
    message: events.Message | None = events.read_or_skip(_DECODER, data)  # a decoder of our messages only
    return message


async def load(bus: Bus, known: Mapping[str, str] | None = None, names: Mapping[str, str] | None = None) -> list[Event]:
    """Every event the log holds (``known`` and ``names`` as ``derive`` takes them)."""
    stored: list[tuple[Stored, float]] = []
    for subject in SUBJECTS:
        stored += await bus.stored(subject)
    return derive(decoded(stored), known, names)


def item(event: Event, now: float) -> dict[str, object]:
    """One event as ``get events`` lists it (``name`` is unique: ``-w`` prints it again when its
    count or last time changes)."""
    what = f"{event.namespace}/{event.kind}/{event.name}/{event.reason}/{event.message}"
    digest = hashlib.sha1(what.encode()).hexdigest()[:10]
    return {
        "name": f"{event.name}.{digest}",
        "namespace": event.listed_in,
        "type": event.type,
        "reason": event.reason,
        "object": event.object,
        "message": event.message,
        "count": event.count,
        "firstTimestamp": event.first,
        "lastTimestamp": event.last,
        "cluster": event.cluster,
        "hyperJob": event.hyperjob,
    }


def unfolded(messages: Iterable[tuple[events.Message, float]]) -> Iterator[tuple[Event, events.Message]]:
    """Each event of ``messages`` with the message it came from, in time order, repeats not folded
    (``hyperjob trace``: every step of a journey, and who took it)."""
    fold = _Fold()
    for message, at in sorted(messages, key=lambda pair: pair[1]):
        for event in fold.of(message, at):
            yield event, message
