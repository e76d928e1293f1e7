"""Pure parts of one cluster's scheduling: the views the scheduler keeps, the snapshot a session
reads, and what a session's decision means for bindings and messages.

Node health (the agent's verdict on its GPUs and fabric) reaches the scheduler as two taints with
clear names, so schedcore's predicates keep new pods off sick nodes without a schedcore feature:
``hyperjob.io/gpu-unhealthy`` (a GPU with uncorrectable ECC errors or a fatal Xid) and
``hyperjob.io/fabric-unhealthy`` (an InfiniBand port down), both ``NoSchedule`` so running pods
stay. Pods the taint does not concern tolerate it: pods that request no GPU tolerate the GPU
taint, and pods of single-pod jobs the fabric taint.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from typing import Final, TypeGuard, TypeVar, get_args, overload

import msgspec

from hyperjob import api, events, records, schedcore
from hyperjob.schedcore.model import PodGroupPhase, QueueState, TaskStatus
from hyperjob.store import Binding, Unbind

from .summary import FABRIC_UNHEALTHY, GPU_UNHEALTHY, is_accelerator

TASK_STATUS: dict[str, TaskStatus] = {
    "Pending": "Pending",
    "Running": "Running",
    "Succeeded": "Succeeded",
    "Failed": "Failed",
    "Terminating": "Releasing",
}
DEFAULT_PODS = 110.0


class NodeView(msgspec.Struct, kw_only=True):
    """A node as its agent reported it, and whether its agent still names it alive."""

    name: str
    agent: str = ""
    allocatable: dict[str, float]
    labels: dict[str, str] = {}
    taints: list[dict[str, str]] = []
    unschedulable: bool = False
    reported_ready: bool = True
    gpu_ok: bool = True
    fabric_ok: bool = True
    sick_gpus: list[int] = []
    down_ports: list[str] = []
    last_seen: float = 0.0
    stale: bool = False

    @property
    def ready(self) -> bool:
        return self.reported_ready and not self.stale

    def all_taints(self) -> list[dict[str, str]]:
        """The node's taints plus the ones its health earns it."""
        taints = list(self.taints)
        if not self.gpu_ok:
            taints.append(
                {"key": GPU_UNHEALTHY, "value": "-".join(f"gpu{i}" for i in self.sick_gpus), "effect": "NoSchedule"}
            )
        if not self.fabric_ok:
            taints.append(
                {
                    "key": FABRIC_UNHEALTHY,
                    "value": "-".join(p.replace("/", ".p") for p in self.down_ports),
                    "effect": "NoSchedule",
                }
            )
        return taints


_T = TypeVar("_T")
_MISSING: Final = object()


class Bookings(dict[str, Binding]):
    """pod → its binding, with what the bindings take on each node kept up to date as they change
    (the capacity summary reads it every period; summing every binding each time would cost as
    much as the fleet is big). ``revision`` counts the changes, ``node_revision`` those of each
    node's ``used``."""

    def __init__(self, bindings: Mapping[str, Binding] | None = None) -> None:
        super().__init__()
        self.used: dict[str, dict[str, float]] = {}
        self.revision = 0
        self.node_revision: dict[str, int] = {}
        for pod, binding in (bindings or {}).items():
            self[pod] = binding

    def __setitem__(self, pod: str, binding: Binding) -> None:
        old = self.get(pod)
        if old is not None:
            self._account(old, -1.0)
        super().__setitem__(pod, binding)
        self._account(binding, 1.0)
        self.revision += 1

    def __delitem__(self, pod: str) -> None:
        old = self[pod]
        super().__delitem__(pod)
        self._account(old, -1.0)
        self.revision += 1

    # dict.pop's own overloads, so that a Bookings is still a dict to its readers.
    @overload
    def pop(self, pod: str, /) -> Binding: ...
    @overload
    def pop(self, pod: str, default: Binding, /) -> Binding: ...
    @overload
    def pop(self, pod: str, default: _T, /) -> Binding | _T: ...
    def pop(self, pod: str, default: object = _MISSING, /) -> object:
        if pod not in self:
            if default is _MISSING:
                raise KeyError(pod)
            return default
        binding = self[pod]
        del self[pod]
        return binding

    def _account(self, binding: Binding, sign: float) -> None:
        self.node_revision[binding.node] = self.node_revision.get(binding.node, 0) + 1
        slot = self.used.setdefault(binding.node, {})
        for resource, amount in binding.request.items():
            slot[resource] = slot.get(resource, 0.0) + sign * amount


class JobView(msgspec.Struct, kw_only=True):
    """A job as the job-controller described it (every part of its ``JobState`` put together)."""

    name: str
    uid: str
    version: int
    created: float
    namespace: str = "default"
    gang: str = ""
    gang_attempt: int = 0
    podgroup: events.PodGroupSpec | None = None
    tasks: dict[str, events.TaskScheduling] = {}
    pods: dict[str, events.PodState] = {}

    @property
    def incarnation(self) -> str:
        """Which podgroup of the job a phase belongs to: a restart (new version) or a new job of
        the same name (new uid) starts from Pending."""
        return f"{self.uid}/{self.version}"


def assemble(parts: Mapping[int, events.JobState]) -> JobView | None:
    """One job from its parts (parts of another incarnation than part 0's are left out)."""
    first = parts.get(0)
    if first is None or first.deleted:
        return None
    view = JobView(
        name=first.job,
        uid=first.uid,
        version=first.version,
        created=first.created,
        namespace=first.namespace,
        gang=first.gang,
        gang_attempt=first.gang_attempt,
        podgroup=first.podgroup,
    )
    for part in sorted(parts):
        state = parts[part]
        if state.uid != first.uid or part >= first.parts:
            continue
        view.tasks.update(state.tasks)
        for pod in state.pods:
            view.pods[pod.name] = pod
    return view


# -- the session's input -------------------------------------------------------------------------


class ClusterView(msgspec.Struct, kw_only=True):
    """Everything one session reads, from the scheduler's memory."""

    nodes: dict[str, NodeView]
    queues: dict[str, events.QueueChanged]
    jobs: dict[str, JobView]
    bound: dict[str, Binding]  # pod -> its binding (from our own commits)
    phases: dict[str, str]  # job -> podgroup phase of the job's current incarnation
    reservations: dict[str, records.ReservationDoc]
    nominated: dict[str, str] = {}
    reasons: dict[str, str] = {}  # job -> the Unschedulable message its podgroup shows now
    faults: dict[str, str] = {}  # job -> the node fault that took its pods, until it runs again

    def reservation(self, job: str) -> records.ReservationDoc | None:
        """The hold of a cross-cluster gang member (None: not a gang member, schedule as usual)."""
        view = self.jobs.get(job)
        if view is None or not view.gang:
            return None
        return current_reservation(self.reservations.get(job), view)

    def may_start(self, job: str) -> bool:
        """Bound pods of a gang member start only once the whole cross-cluster gang holds."""
        reservation = self.reservation(job)
        return reservation is None or reservation.state == "Started"


def current_reservation(doc: records.ReservationDoc | None, view: JobView) -> records.ReservationDoc:
    """The hold of this incarnation of a gang member: a document about an earlier incarnation
    (a re-planned child of the same name) does not apply, and a new one starts Reserving for the
    attempt it was dispatched with."""
    if doc is not None and doc.uid in ("", view.uid):
        return doc
    return records.ReservationDoc(state="Reserving", attempt=max(view.gang_attempt, 1), uid=view.uid)


class SnapshotCache:
    """The nodes and jobs of the last snapshot, each reused while what it was built from is the
    same (a session reads every node and job; few change from one second to the next)."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[NodeView, bool, schedcore.NodeInfo]] = {}
        self.jobs: dict[str, tuple[JobView, tuple[object, ...], schedcore.JobInfo | None]] = {}

    def node(self, view: NodeView) -> schedcore.NodeInfo:
        cached = self.nodes.get(view.name)
        if cached is not None and cached[0] is view and cached[1] == view.ready:
            return cached[2]
        info = node_info(view)
        self.nodes[view.name] = (view, view.ready, info)
        return info

    def job(self, view: JobView, state: ClusterView, sick: bool) -> schedcore.JobInfo | None:
        # What a job's tasks depend on besides the view itself: its podgroup phase, where its pods
        # are bound, the nodes nominated for them, and whether any node is sick.
        bound, nominated = state.bound, state.nominated
        key = (
            state.phases.get(view.name),
            sick,
            tuple((b.node, b.uid, b.devices) if (b := bound.get(p)) is not None else None for p in view.pods),
            tuple(nominated.get(p, "") for p in view.pods) if nominated else (),
        )
        cached = self.jobs.get(view.name)
        if cached is not None and cached[0] is view and cached[1] == key:
            return cached[2]
        info = job_info(view, state, sick)
        self.jobs[view.name] = (view, key, info)
        return info

    def forget(self, nodes: Collection[str], jobs: Collection[str]) -> None:
        """Drop what no longer exists (kept: the names still in ``nodes`` and ``jobs``)."""
        self.nodes = {n: v for n, v in self.nodes.items() if n in nodes}
        self.jobs = {j: v for j, v in self.jobs.items() if j in jobs}


def snapshot(state: ClusterView, now: float, cache: SnapshotCache | None = None) -> schedcore.Snapshot:
    """What one session reads: every node (NotReady ones too: schedcore ignores them), every
    queue (``default`` always exists), every job whose podgroup exists, with its pods as tasks."""
    cache = cache or SnapshotCache()
    sick = any(not n.gpu_ok or not n.fabric_ok for n in state.nodes.values())
    nodes = [cache.node(n) for _, n in sorted(state.nodes.items())]
    queues = [queue_info(q) for q in state.queues.values()]
    if api.DEFAULT_QUEUE not in state.queues:
        queues.append(DEFAULT_QUEUE)
    jobs = [info for _, view in sorted(state.jobs.items()) if (info := cache.job(view, state, sick))]
    cache.forget(state.nodes, state.jobs)
    return schedcore.Snapshot(nodes=nodes, queues=sorted(queues, key=lambda q: (q.created, q.name)), jobs=jobs, now=now)


def node_info(node: NodeView) -> schedcore.NodeInfo:
    return schedcore.NodeInfo(
        name=node.name,
        allocatable=node.allocatable,
        labels=node.labels,
        taints=[msgspec.convert(t, api.Taint) for t in node.all_taints()],
        unschedulable=node.unschedulable,
        ready=node.ready,
    )


def queue_info(queue: events.QueueChanged) -> schedcore.QueueInfo:
    manifest = api.expect_kind(api.decode_stored(queue.manifest), api.Queue)
    spec = manifest.spec
    parse = api.quantity.parse_resource_list
    return schedcore.QueueInfo(
        name=queue.name,
        weight=float(spec.weight),
        capability=parse(spec.capability),
        deserved=parse(spec.deserved),
        guarantee=parse(spec.guarantee.resource),
        reclaimable=spec.reclaimable is not False,
        priority=spec.priority,
        parent=spec.parent,
        state=queue.state if _is_queue_state(queue.state) else "Unknown",
        created=queue.created,
        affinity=spec.affinity,
    )


def _is_queue_state(text: str) -> TypeGuard[QueueState]:
    return text in get_args(QueueState)


def podgroup_phase(text: str) -> PodGroupPhase:
    """A stored podgroup phase as schedcore's type (an unknown word is Volcano's ``Unknown``)."""
    return text if _is_podgroup_phase(text) else "Unknown"


def _is_podgroup_phase(text: str) -> TypeGuard[PodGroupPhase]:
    return text in get_args(PodGroupPhase)


DEFAULT_QUEUE = schedcore.QueueInfo(name=api.DEFAULT_QUEUE, weight=1.0, reclaimable=True)


def job_info(view: JobView, state: ClusterView, sick: bool) -> schedcore.JobInfo | None:
    pg = view.podgroup
    if pg is None:
        return None
    topology = msgspec.convert(pg.network_topology, api.NetworkTopology) if pg.network_topology else None
    return schedcore.JobInfo(
        name=view.name,
        queue=pg.queue,
        priority=pg.priority,
        min_member=pg.min_member,
        min_task_member=dict(pg.min_task_member),
        min_resources=dict(pg.min_resources),
        phase=podgroup_phase(state.phases.get(view.name, "Pending")),
        created=view.created,
        network_topology=topology,
        tasks=_tasks(view, state, sick),
        namespace=view.namespace,
    )


def _tasks(view: JobView, state: ClusterView, sick: bool) -> list[schedcore.TaskInfo]:
    tasks = []
    for pod in sorted(view.pods.values(), key=lambda p: p.name):
        scheduling = view.tasks.get(pod.task)
        if scheduling is None:
            continue
        binding = state.bound.get(pod.name)
        if binding is not None and binding.uid not in ("", pod.uid):
            binding = None
        node = binding.node if binding is not None else None
        status: TaskStatus
        if pod.phase == "Pending" and node is not None:
            status = "Bound"  # bound by us, not yet reported running by its node
        elif pod.phase == "Terminating" and node is None and not pod.node:
            continue  # never placed: it holds nothing
        elif pod.phase == "Pending" and scheduling.node_name:
            continue  # names its node: bound there directly, never scheduled (see ``direct_binds``)
        else:
            status = TASK_STATUS.get(pod.phase, "Pending")
        tasks.append(
            task_info(
                view,
                pod,
                scheduling,
                status,
                node or pod.node or None,
                state.nominated.get(pod.name, ""),
                sick,
                binding.devices if binding else (),
            )
        )
    return tasks


def task_info(
    view: JobView,
    pod: events.PodState,
    s: events.TaskScheduling,
    status: TaskStatus,
    node: str | None,
    nominated: str,
    sick: bool,
    devices: tuple[int, ...] = (),
) -> schedcore.TaskInfo:
    tolerations = [msgspec.convert(t, api.Toleration) for t in s.tolerations]
    if sick:  # only then: tolerations take tasks off schedcore's fast path
        tolerations += health_tolerations(s.request, len(view.pods))
    return schedcore.TaskInfo(
        name=pod.name,
        job=view.name,
        role=pod.task,
        index=pod.index,
        request={k: v for k, v in s.request.items() if k != "pods"},  # schedcore adds the pod slot itself
        status=status,
        node=node,
        priority=s.priority,
        preemptable=s.preemptable,
        node_selector=dict(s.node_selector),
        affinity=msgspec.convert(s.affinity, api.pod.Affinity) if s.affinity else None,
        tolerations=tolerations,
        preemption_policy=s.preemption_policy,
        namespace=view.namespace,
        priority_class=s.priority_class_name,
        created=pod.created,
        nominated_node=nominated,
        devices=devices,
        topology_policy=s.topology_policy,
    )


def health_tolerations(request: Mapping[str, float], job_pods: int) -> list[api.Toleration]:
    """What a pod may ignore: GPU faults when it wants no GPU, fabric faults when its job is one pod."""
    out = []
    if not any(amount > 0 for resource, amount in request.items() if is_accelerator(resource)):
        out.append(api.Toleration(key=GPU_UNHEALTHY, operator="Exists", effect="NoSchedule"))
    if job_pods <= 1:
        out.append(api.Toleration(key=FABRIC_UNHEALTHY, operator="Exists", effect="NoSchedule"))
    return out


# -- what a cycle does -----------------------------------------------------------------------------


class CycleOutcome(msgspec.Struct, kw_only=True):
    """What one cycle changes: bindings and releases (committed together), the messages each job
    gets, the reservations that are now held or lost, and the podgroup phases."""

    binds: list[Binding] = []
    unbinds: list[Unbind] = []
    bound: dict[str, list[events.PodRef]] = {}
    evicted: dict[str, list[events.PodRef]] = {}
    rejected: dict[str, list[events.PodRef]] = {}
    held: list[str] = []
    lost: list[str] = []
    phases: dict[str, str] = {}
    reasons: dict[str, str] = {}  # job -> its podgroup's Unschedulable message, for each job in ``phases``

    def add(self, table: dict[str, list[events.PodRef]], job: str, ref: events.PodRef) -> None:
        table.setdefault(job, []).append(ref)


def housekeeping(cluster: str, state: ClusterView, down: set[str]) -> CycleOutcome:
    """Before a session: give back what finished or vanished, take pods off the ``down`` nodes,
    bind pods that name their node, and announce bound pods whose job may start (a gang that just
    started, or an announcement a crash lost)."""
    out = CycleOutcome()
    pods = {p.name: (view, p) for view in state.jobs.values() for p in view.pods.values()}
    for name, binding, found in _to_release(state.bound, pods, down):
        if found is None or found[1].phase in ("Succeeded", "Failed") or (binding.uid and binding.uid != found[1].uid):
            out.unbinds.append(Unbind(cluster, name))
        else:  # on a down node
            out.unbinds.append(Unbind(cluster, name))
            view, pod = found
            out.add(out.evicted, view.name, events.PodRef(pod=name, uid=pod.uid, node=binding.node, reason="nodeDown"))
            if state.reservation(view.name) is not None and not state.may_start(view.name):
                out.lost.append(view.name)
    released = {u.pod for u in out.unbinds}
    for view in sorted(state.jobs.values(), key=lambda v: v.name):
        # Only Pending pods matter here (most pods of a busy cluster run: skip them first).
        waiting = sorted((p for p in view.pods.values() if p.phase == "Pending"), key=lambda p: p.name)
        if not waiting:
            continue
        _direct_binds(cluster, state, view, waiting, out)
        if state.may_start(view.name):
            for pod in waiting:
                held = state.bound.get(pod.name)
                if held is not None and pod.name not in released and not pod.node and held.uid in ("", pod.uid):
                    out.add(
                        out.bound,
                        view.name,
                        events.PodRef(pod=pod.name, uid=pod.uid, node=held.node, devices=held.devices),
                    )
    return out


def _to_release(
    bound: Mapping[str, Binding], pods: Mapping[str, tuple[JobView, events.PodState]], down: Collection[str]
) -> list[tuple[str, Binding, tuple[JobView, events.PodState] | None]]:
    """The bindings housekeeping gives back, by pod name: the pod is gone, finished, another
    incarnation, or on a ``down`` node (found first, then sorted: most bindings stay)."""
    found = []
    for name, binding in bound.items():
        pod = pods.get(name)
        if (
            pod is None
            or pod[1].phase in ("Succeeded", "Failed")
            or (binding.uid and binding.uid != pod[1].uid)
            or binding.node in down
        ):
            found.append((name, binding, pod))
    return sorted(found, key=lambda f: f[0])


def _direct_binds(
    cluster: str, state: ClusterView, view: JobView, waiting: list[events.PodState], out: CycleOutcome
) -> None:
    """Kubernetes' ``spec.nodeName``: the pod is bound to that node at creation and never goes
    through the scheduler; a node that cannot admit it fails it (``OutOf<resource>``)."""
    for pod in waiting:
        s = view.tasks.get(pod.task)
        if s is None or not s.node_name or pod.name in state.bound:
            continue
        reason = _admission_failure(state, s.node_name, s.request, out)
        ref = events.PodRef(pod=pod.name, uid=pod.uid, node=s.node_name, reason=reason)
        if reason:
            out.add(out.rejected, view.name, ref)
            continue
        out.binds.append(Binding(cluster, pod.name, s.node_name, dict(s.request), pod.uid))
        if state.may_start(view.name):
            out.add(out.bound, view.name, ref)


def _admission_failure(state: ClusterView, node: str, request: Mapping[str, float], out: CycleOutcome) -> str:
    view = state.nodes.get(node)
    if view is None:
        return "NodeNotFound"
    if not view.ready:
        return "NodeNotReady"
    used = used_by_node(state.bound.values(), out.binds)
    taken = used.get(node, {})
    for resource in sorted(request, key=lambda r: (r in ("cpu", "memory", "pods"), r)):
        capacity = view.allocatable.get(resource, DEFAULT_PODS if resource == "pods" else 0.0)
        if taken.get(resource, 0.0) + request[resource] > capacity + 1e-9:
            return f"OutOf{resource}"
    return ""


def evict_for_gang(
    cluster: str, state: ClusterView, victims: Iterable[events.PreemptVictims], reason: str, out: CycleOutcome
) -> int:
    """Release the named pods that run here now (``PodsEvicted`` with ``reason``); how many.
    A pod no longer bound, or bound for another incarnation, is skipped."""
    released = {u.pod for u in out.unbinds}
    count = 0
    for victim in sorted(victims, key=lambda v: v.job):
        view = state.jobs.get(victim.job)
        for name in sorted(victim.pods):
            pod = view.pods.get(name) if view is not None else None
            binding = state.bound.get(name)
            if view is None or pod is None or binding is None or name in released or pod.phase != "Running":
                continue
            if binding.uid not in ("", pod.uid):
                continue
            out.unbinds.append(Unbind(cluster, name))
            out.add(out.evicted, view.name, events.PodRef(pod=name, uid=pod.uid, node=binding.node, reason=reason))
            count += 1
    return count


def gate_lifted(state: ClusterView, child: str, expired: bool) -> bool:
    """Whether a preemption's victims may schedule again: the gang's child holds pods here (or
    runs), is gone, or the wait ``expired``."""
    view = state.jobs.get(child)
    return expired or view is None or any(name in state.bound for name in view.pods)


def used_by_node(*bindings: Iterable[Binding]) -> dict[str, dict[str, float]]:
    used: dict[str, dict[str, float]] = {}
    for group in bindings:
        for b in group:
            slot = used.setdefault(b.node, {})
            for r, a in b.request.items():
                slot[r] = slot.get(r, 0.0) + a
    return used


def apply_decision(cluster: str, state: ClusterView, decision: schedcore.Decision, out: CycleOutcome) -> None:
    """What a session decided, as bindings, releases and messages (``out`` already holds the
    housekeeping of this cycle)."""
    # Every pod by name, only for a decision that binds or evicts (most cycles do neither).
    pods = (
        {p.name: (view, p) for view in state.jobs.values() for p in view.pods.values()}
        if decision.evictions or decision.binds
        else {}
    )
    released = {u.pod for u in out.unbinds}
    for evict in decision.evictions:
        found = pods.get(evict.task)
        if found is None or evict.task not in state.bound or evict.task in released:
            continue
        view, pod = found
        out.unbinds.append(Unbind(cluster, evict.task))
        out.add(out.evicted, view.name, events.PodRef(pod=pod.name, uid=pod.uid, node=evict.node, reason=evict.reason))
        if state.reservation(view.name) is not None and not state.may_start(view.name) and view.name not in out.lost:
            out.lost.append(view.name)
    for job, binds in _by_job(decision.binds).items():
        _bind_gang(cluster, state, job, binds, pods, out)
    for job, phase in sorted(decision.podgroup_phases.items()):
        if job not in state.jobs:
            continue
        # Just enqueued, its pods not created yet by its job-controller: it waits for them, not for
        # room, so no Unschedulable condition ("32/0 tasks in gang unschedulable" on every job).
        # A Pending podgroup without pods keeps its reason: its queue did not enqueue it.
        awaiting_pods = phase == "Inqueue" and not state.jobs[job].pods
        waits_for_room = phase not in SCHEDULED_PHASES and not awaiting_pods
        reason = decision.unschedulable.get(job, "") if waits_for_room else ""
        if reason and job in state.faults:
            reason = f"{state.faults[job]}; {reason}"
        old_reason = state.reasons.get(job, "")
        if state.phases.get(job, "Pending") != phase or reason_kind(reason) != reason_kind(old_reason):
            out.phases[job] = phase
            out.reasons[job] = reason


def waiting_pods(state: ClusterView, decision: schedcore.Decision, out: CycleOutcome) -> dict[str, int]:
    """Each job the session left unschedulable (``namespace/name``, as Volcano's ``job_id``) and
    how many of its pods are still waiting for a node after this cycle."""
    bound = {b.pod for b in out.binds} | (set(state.bound) - {u.pod for u in out.unbinds})
    result = {}
    for job in decision.unschedulable:
        view = state.jobs.get(job)
        if view is not None:
            waiting = sum(1 for p in view.pods.values() if p.phase == "Pending" and not p.node and p.name not in bound)
            result[f"{view.namespace}/{job}"] = waiting
    return result


def node_faults(known: Mapping[str, str], decision: schedcore.Decision, out: CycleOutcome) -> dict[str, str]:
    """Which jobs lost pods to a node fault (``known``, plus this cycle's evictions from nodes
    that went down), until their podgroup runs again: the fault heads their Unschedulable message,
    so a job that fell from Running says why, not only what it now lacks."""
    faults = {job: why for job, why in known.items() if decision.podgroup_phases.get(job) not in SCHEDULED_PHASES}
    for job, refs in out.evicted.items():
        nodes = sorted({r.node for r in refs if r.reason == "nodeDown"})
        if nodes:
            faults[job] = f"{len(refs)} pods evicted from NotReady node(s) {', '.join(nodes)}"
    return faults


# A podgroup this far has what it asked for: no Unschedulable condition (Volcano clears it).
SCHEDULED_PHASES = frozenset({"Running", "Completed"})


def reason_kind(reason: str) -> str:
    """What an Unschedulable message says, its counts left out: a podgroup's condition is
    announced again when the kind of reason changes (a node went NotReady), not at each cycle
    where another job took a node and ``5 Insufficient cpu`` became ``6 Insufficient cpu``."""
    return re.sub(r"\d+(\.\d+)?", "#", reason)


def _bind_gang(
    cluster: str,
    state: ClusterView,
    job: str,
    binds: list[schedcore.Bind],
    pods: Mapping[str, tuple[JobView, events.PodState]],
    out: CycleOutcome,
) -> None:
    view = state.jobs.get(job)
    if view is None:
        return
    reservation = state.reservation(job)
    if reservation is not None and reservation.state not in ("Reserving", "Started"):
        return  # held already, or given back until the global-scheduler asks again
    for b in binds:
        _, pod = pods[b.task]
        s = view.tasks[pod.task]
        out.binds.append(Binding(cluster, b.task, b.node, dict(s.request), pod.uid, tuple(b.devices)))
        if reservation is None or reservation.state == "Started":
            out.add(out.bound, job, events.PodRef(pod=b.task, uid=pod.uid, node=b.node, devices=tuple(b.devices)))
    if reservation is not None and reservation.state == "Reserving":
        out.held.append(job)


def _by_job(binds: list[schedcore.Bind]) -> dict[str, list[schedcore.Bind]]:
    grouped: dict[str, list[schedcore.Bind]] = {}
    for bind in binds:
        grouped.setdefault(bind.job, []).append(bind)
    return dict(sorted(grouped.items()))


# -- node liveness ---------------------------------------------------------------------------------


def stale_nodes(nodes: Mapping[str, NodeView], newest_beat: float, timeout: float) -> set[str]:
    """Nodes their agents have not named alive for ``timeout`` seconds before the newest beat the
    scheduler received: judged on what arrived, so a scheduler cut off from the bus finds no
    node stale (it receives no beat at all)."""
    return {name for name, node in nodes.items() if newest_beat - node.last_seen > timeout}
