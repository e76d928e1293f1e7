"""What the simulator shows: the timeline, from the messages the services published, and the
result, from the documents they keep (the same documents ``hyperjob get`` reads).

The simulator decides nothing: a ``PodBound`` on the timeline is a ``PodsBound`` a
cluster-scheduler published, a ``JobPhaseChanged`` one a job-controller published, and so on.
"""

from __future__ import annotations

import msgspec

from hyperjob import api, events, jobcore, records
from hyperjob.jobcore import model as jm
from hyperjob.store import InMemoryStore

from . import output
from .timing import SimClock

TIMELINE_TYPES = (
    events.PodsBound,
    events.PodsEvicted,
    events.PodsRejected,
    events.PodPhasesReported,
    events.JobPhaseChanged,
    events.PodGroupPhaseChanged,
    events.HyperJobStatusChanged,
    events.RequestRejected,
)
_DECODER = events.decoder(*TIMELINE_TYPES)
# Liveness and summaries flow all the time; they are not something that happened.
QUIET_PREFIXES = ("heartbeat.", "capacity.", "telemetry.", "sched.lease.")  # the fleet's periodic reports


class Timeline:
    """Listens to every message stored on the bus and keeps the scenario's events."""

    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        self.events: list[output.EventRow] = []
        self.last_activity = 0.0
        self._hyperjob_phase: dict[str, str] = {}

    def observe(self, stream: str, subject: str, data: bytes, headers: dict[str, str]) -> None:
        if not subject.startswith(QUIET_PREFIXES):
            self.last_activity = self.clock.now()
        if not subject.startswith(
            ("sched.pods.", "sched.podgroup.", "node.pods.", "job.phase.", "hj.hyperjob.status", "hj.result.")
        ):
            return
        try:
            message = _DECODER.decode(data)
        except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError):
            return  # poison is the services' to dead-letter; the timeline records only what it can read
        self._record(message)

    def emit(
        self,
        type_: str,
        obj: str,
        *,
        cluster: str | None = None,
        node: str | None = None,
        reason: str = "",
        phase: str = "",
    ) -> None:
        event = output.event(self.clock.now(), type_, obj, cluster=cluster, node=node, reason=reason, phase=phase)
        self.events.append(event)
        self.last_activity = self.clock.now()

    def _record(self, m: events.Message) -> None:
        if isinstance(m, events.PodsBound):
            for p in m.pods:
                self.emit("PodBound", p.pod, cluster=m.cluster, node=p.node)
        elif isinstance(m, events.PodsEvicted):
            for p in m.pods:
                self.emit("PodEvicted", p.pod, cluster=m.cluster, node=p.node, reason=p.reason)
        elif isinstance(m, events.PodsRejected):  # ``nodeName`` on a node without room: the node fails it
            for p in m.pods:
                self.emit("PodFailed", p.pod, cluster=m.cluster, node=p.node, reason=p.reason)
        elif isinstance(m, events.PodPhasesReported):
            for r in m.reports:
                if r.phase == "Succeeded":
                    self.emit("PodSucceeded", r.pod, cluster=m.cluster, node=r.node)
                elif r.phase == "Failed":
                    self.emit("PodFailed", r.pod, cluster=m.cluster, node=r.node, reason=f"exitCode {r.exit_code}")
        elif isinstance(m, events.JobPhaseChanged):
            self.emit("JobPhaseChanged", m.job, cluster=m.cluster, reason=m.reason, phase=m.new)
        elif isinstance(m, events.PodGroupPhaseChanged):
            self.emit("PodGroupPhaseChanged", m.job, cluster=m.cluster, phase=m.phase)
        elif isinstance(m, events.HyperJobStatusChanged):
            if self._hyperjob_phase.get(m.name) != m.phase:
                self._hyperjob_phase[m.name] = m.phase
                self.emit("HyperJobPhaseChanged", m.name, reason=str(m.status.get("waitingReason", "")), phase=m.phase)
        elif isinstance(m, events.RequestRejected):
            self.emit("Rejected", m.name or "?", reason=m.reason)


# -- the result, from the services' documents --------------------------------------------------------


async def result(name: str, end: float, store: InMemoryStore, clusters: list[str], timeline: Timeline) -> output.Result:
    jobs: list[output.JobRow] = []
    pods: list[output.PodRow] = []
    groups: list[output.PodGroupRow] = []
    # Where the global-scheduler runs each job now: a copy left on a cluster it failed over from
    # (that cluster is down, and removes it when it returns) is not shown.
    placed = {n: d.decode(records.PlacementDoc) for n, d in (await store.list(records.PLACEMENT)).items()}
    for cluster in clusters:
        phases = {
            n: d.decode(records.PodGroupPhaseDoc) for n, d in (await store.list(records.pgphase_kind(cluster))).items()
        }
        children = {n: d.decode(records.ChildInfo) for n, d in (await store.list(records.child_kind(cluster))).items()}
        for job_name, doc in (await store.list(records.job_kind(cluster))).items():
            placement = placed.get(job_name)
            if placement is not None and placement.cluster and placement.cluster != cluster:
                continue
            record = doc.decode(jm.JobRecord)
            info = children.get(job_name, records.ChildInfo())
            moves = placement.moves if placement is not None else 0
            jobs.append(
                {
                    "name": record.name,
                    "hyperJob": info.hyperjob or None,
                    "cluster": cluster,
                    "phase": record.phase,
                    "retryCount": record.retry_count,
                }
            )
            pods += [_pod(p, cluster, moves) for p in record.pods.values()]
            if record.podgroup_exists:
                groups.append(_podgroup(record, cluster, phases.get(job_name)))
        for pg_name, doc in (await store.list(records.bare_podgroup_kind(cluster))).items():
            groups.append(_bare(doc.decode(records.BarePodGroupDoc), cluster, phases.get(pg_name)))
    jobs += await _undispatched(store, {j["name"] for j in jobs})
    return output.result(
        name,
        end,
        pods=pods,
        pod_groups=groups,
        jobs=jobs,
        hyperjobs=await _hyperjobs(store),
        queues=await _queues(store, clusters),
        events=timeline.events,
    )


def _pod(pod: jm.PodRecord, cluster: str, moves: int) -> output.PodRow:
    phase = "Running" if pod.phase == "Terminating" else pod.phase
    node = pod.node if phase != "Pending" else None
    return {
        "name": pod.name,
        "job": pod.job,
        "task": pod.task,
        "index": pod.index,
        "cluster": cluster,
        "node": node,
        "phase": phase,
        "startedAt": output.seconds(pod.status.started_at),
        "finishedAt": output.seconds(pod.status.finished_at),
        "restarts": pod.restarts + moves,
    }


def _podgroup(record: jm.JobRecord, cluster: str, phase: records.PodGroupPhaseDoc | None) -> output.PodGroupRow:
    pg = jobcore.derive_podgroup(record)
    current = phase.phase if phase is not None and phase.incarnation == f"{record.uid}/{record.version}" else "Pending"
    return {
        "name": record.name,
        "cluster": cluster,
        "queue": pg.queue,
        "phase": current,
        "minMember": pg.min_member,
        "minResources": output.resources(pg.min_resources, ("cpu", "memory")),
    }


def _bare(doc: records.BarePodGroupDoc, cluster: str, phase: records.PodGroupPhaseDoc | None) -> output.PodGroupRow:
    pg = api.decode(doc.manifest)
    assert isinstance(pg, api.PodGroup)
    resources = api.quantity.parse_resource_list(pg.spec.min_resources or {})
    current = phase.phase if phase is not None and phase.incarnation == f"{doc.uid}/0" else "Pending"
    return {
        "name": pg.metadata.name,
        "cluster": cluster,
        "queue": pg.spec.queue or api.DEFAULT_QUEUE,
        "phase": current,
        "minMember": pg.spec.min_member,
        "minResources": output.resources(resources, ("cpu", "memory")),
    }


async def _undispatched(store: InMemoryStore, known: set[str]) -> list[output.JobRow]:
    """Accepted jobs no cluster has yet: plain Jobs waiting for admission or a cluster, children
    waiting for room."""
    out: list[output.JobRow] = []
    for name, doc in (await store.list(records.HYPERJOB)).items():
        hj = doc.decode(records.HyperJobDoc)
        if hj.plain and hj.manifest.get("kind") == "Job" and name not in known:
            out.append({"name": name, "hyperJob": None, "cluster": None, "phase": "Pending", "retryCount": 0})
        elif not hj.plain:
            out += [
                {"name": ref.name, "hyperJob": name, "cluster": None, "phase": "Pending", "retryCount": 0}
                for ref in hj.children
                if ref.name not in known
            ]
    return out


async def _hyperjobs(store: InMemoryStore) -> list[output.HyperJobRow]:
    out: list[output.HyperJobRow] = []
    statuses = {n: d.decode(records.HyperJobStatusDoc) for n, d in (await store.list(records.HYPERJOB_STATUS)).items()}
    for name, doc in (await store.list(records.HYPERJOB)).items():
        if doc.decode(records.HyperJobDoc).plain:
            continue
        status = statuses.get(name)
        body = status.status if status is not None else {}
        conditions: list[output.Condition] = [
            {"type": c.get("type"), "status": c.get("status"), "reason": c.get("reason", "")}
            for c in body.get("conditions", [])
        ]
        out.append(
            {
                "name": name,
                "phase": status.phase if status is not None else "Pending",
                "splitCount": body.get("splitCount", 0),
                "placement": dict(body.get("placement", {})),
                "conditions": conditions,
            }
        )
    return out


async def _queues(store: InMemoryStore, clusters: list[str]) -> list[output.QueueRow]:
    docs = {n: d.decode(records.QueueDoc) for n, d in (await store.list(records.QUEUE)).items()}
    states = {api.DEFAULT_QUEUE: "Open", **{n: d.state for n, d in docs.items()}}
    for doc in docs.values():  # a hierarchy's root (and any parent not declared) exists implicitly
        parent = str(doc.manifest.get("spec", {}).get("parent") or "")
        for implicit in (parent, "root") if parent else ():
            states.setdefault(implicit, "Open")
    out: list[output.QueueRow] = []
    for cluster in clusters:
        usage = {
            n: d.decode(records.QueueUsageDoc) for n, d in (await store.list(records.queue_usage_kind(cluster))).items()
        }
        for name, state in states.items():
            u = usage.get(name)
            out.append(
                {
                    "name": name,
                    "cluster": cluster,
                    "state": state,
                    "allocated": output.resources(u.allocated if u else {}),
                    "deserved": output.resources(u.deserved if u else {}),
                }
            )
    return out
