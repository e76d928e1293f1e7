"""Global queue admission over the whole fleet: capability, priority, weighted fair share.

A Queue's ``capability`` and ``weight`` apply to the fleet (the sum over clusters); deserved
shares come from proportion's water-filling over the fleet's total allocatable. ``admit`` runs
dispatch rounds: queues in order (priority, then lowest share, then creation, then name), one
admission per queue per round, so a big job that cannot be admitted does not block the smaller
ones behind it — unless the queue opts into strict FIFO with the annotation
``hyperjob.io/queue-ordering: strict-fifo``, in which case its head blocks the queue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import msgspec

from hyperjob import api
from hyperjob.api.quantity import ResourceList, add, format_quantity, parse_resource_list

from .capacity import hyperjob_request, spec_request
from .model import ClusterCapacity, Waiting
from .split import INADMISSIBLE, plan_split

STRICT_FIFO_ANNOTATION = "hyperjob.io/queue-ordering"
STRICT_FIFO = "strict-fifo"
_EPS = 1e-9
_UNQUOTED = ("pods",)  # like Volcano's quota checks, pod slots are not a queue quota


class FleetQueue(msgspec.Struct, frozen=True, kw_only=True):
    """A global queue. ``capability``/``guarantee`` empty means none."""

    name: str
    weight: int = 1
    capability: ResourceList = {}
    guarantee: ResourceList = {}
    priority: int = 0
    created: float = 0.0
    state: str = "Open"
    strict_fifo: bool = False
    reclaimable: bool = True  # Volcano's default: other queues may reclaim what it borrowed


class Candidate(msgspec.Struct, frozen=True, kw_only=True):
    """A HyperJob (or plain Job) waiting for global admission; ``request`` counts every task."""

    name: str
    queue: str
    request: ResourceList
    priority: int = 0
    created: float = 0.0


class QueueShare(msgspec.Struct, frozen=True, kw_only=True):
    allocated: ResourceList
    deserved: ResourceList
    share: float


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    """``admitted`` in admission order; ``waiting`` maps every other candidate to why it waits."""

    admitted: tuple[str, ...]
    waiting: dict[str, str]
    queues: dict[str, QueueShare]


def fleet_queue(queue: api.Queue, created: float = 0.0) -> FleetQueue:
    """The global view of a Queue manifest (``created`` is the driver's creation time)."""
    spec = queue.spec
    state = (queue.status.state if queue.status else None) or spec.state or "Open"
    return FleetQueue(
        name=queue.metadata.name,
        weight=spec.weight,
        capability=parse_resource_list(spec.capability),
        guarantee=parse_resource_list(spec.guarantee.resource),
        priority=spec.priority,
        created=created,
        state=state,
        strict_fifo=queue.metadata.annotations.get(STRICT_FIFO_ANNOTATION) == STRICT_FIFO,
        reclaimable=spec.reclaimable is not False,
    )


def hyperjob_candidate(
    hyperjob: api.HyperJob, created: float, priority_classes: Mapping[str, int] | None = None
) -> Candidate:
    """A HyperJob as an admission candidate: every task of every child counted; its queue is the
    first replicated job's (``default`` when empty); its priority the highest PriorityClass value
    among its templates (unknown or empty names count 0)."""
    values = priority_classes or {}
    templates = [rj.template_spec for rj in hyperjob.spec.replicated_jobs]
    queue = (templates[0].queue if templates else "") or api.DEFAULT_QUEUE
    return Candidate(
        name=hyperjob.metadata.name,
        queue=queue,
        request=hyperjob_request(hyperjob),
        created=created,
        priority=max((values.get(t.priority_class_name, 0) for t in templates), default=0),
    )


def job_candidate(job: api.Job, created: float, priority_classes: Mapping[str, int] | None = None) -> Candidate:
    """A plain Volcano Job as an admission candidate (same rules as ``hyperjob_candidate``)."""
    return Candidate(
        name=job.metadata.name,
        queue=job.spec.queue or api.DEFAULT_QUEUE,
        request=spec_request(job.spec),
        created=created,
        priority=(priority_classes or {}).get(job.spec.priority_class_name, 0),
    )


def inadmissible(hyperjob: api.HyperJob, clusters: Mapping[str, ClusterCapacity]) -> str:
    """Why no split could ever hold ``hyperjob`` on these clusters, even all empty (Kueue's
    inadmissible: said before admission, so it neither waits as a queue limit nor holds a place
    in its queue); "" when some split could, or when no cluster is known yet. Pure."""
    if not clusters:
        return ""
    empty = {name: _emptied(cap) for name, cap in clusters.items()}
    split = plan_split(hyperjob, empty)
    if not isinstance(split, Waiting):
        return ""
    return INADMISSIBLE + split.reason.replace(INADMISSIBLE, "")  # first, as the splitter looks for it


def _emptied(cluster: ClusterCapacity) -> ClusterCapacity:
    nodes = tuple(msgspec.structs.replace(n, free=dict(n.allocatable), ready=True) for n in cluster.nodes)
    return msgspec.structs.replace(cluster, free=dict(cluster.allocatable), nodes=nodes, ready=True)


def fleet_capacity(clusters: Iterable[ClusterCapacity]) -> ResourceList:
    """The fleet's total allocatable (pass only live clusters)."""
    return add(*(c.allocatable for c in clusters))


def admit(
    queues: Mapping[str, FleetQueue],
    allocated: Mapping[str, ResourceList],
    pending: Sequence[Candidate],
    capacity: ResourceList,
    preemptible: Sequence[tuple[int, ResourceList]] = (),
) -> Admission:
    """One admission pass. Pure; the same inputs give the same answer.

    ``preemptible``: (priority, request) of admitted work that coordinated preemption could take
    back; a candidate counts what work of lower priority holds as fleet room (whether it can take
    it is decided, all or nothing, when its gang is placed: ``plan_preemption``).

    ``allocated``: per queue, the requests of what it already has admitted and not finished.
    ``capacity``: the fleet's allocatable (``fleet_capacity``). A candidate is admitted when its
    queue is Open, the queue's fleet-wide capability holds it, and the fleet has the room not yet
    promised to admitted work. Call again whenever something changes (a candidate arrives, work
    finishes, capacity changes); candidates not admitted keep their ``waiting`` reason.
    """
    usage = {name: dict(allocated.get(name, {})) for name in queues}
    demand = {name: add(usage[name], *(c.request for c in pending if c.queue == name)) for name in queues}
    deserved = deserved_shares(queues, demand, capacity)
    promised = add(*usage.values())
    lines = _lines(queues, pending)
    admitted: list[str] = []
    waiting: dict[str, str] = {c.name: f"queue {c.queue} does not exist" for c in pending if c.queue not in queues}
    # First every queue up to its deserved share (weighted fair share), then, so no room idles,
    # beyond it in the same order.
    for fair in (True, False):
        progress = True
        while progress:
            progress = False
            for name in sorted(lines, key=lambda q: _queue_key(queues[q], usage[q], deserved[q])):
                limit = deserved[name] if fair else None
                chosen = _turn(queues[name], lines[name], usage[name], promised, capacity, waiting, limit, preemptible)
                if chosen is not None:
                    admitted.append(chosen.name)
                    usage[name] = add(usage[name], chosen.request)
                    promised = add(promised, chosen.request)
                    waiting.pop(chosen.name, None)
                    progress = True
    shares = {
        n: QueueShare(allocated=usage[n], deserved=deserved[n], share=share(usage[n], deserved[n]))
        for n in sorted(queues)
    }
    return Admission(admitted=tuple(admitted), waiting=dict(sorted(waiting.items())), queues=shares)


def _lines(queues: Mapping[str, FleetQueue], pending: Sequence[Candidate]) -> dict[str, list[Candidate]]:
    """Each queue's candidates in job order: priority, then creation time, then name."""
    lines: dict[str, list[Candidate]] = {}
    for cand in sorted(pending, key=lambda c: (-c.priority, c.created, c.name)):
        if cand.queue in queues:
            lines.setdefault(cand.queue, []).append(cand)
    return lines


def _queue_key(queue: FleetQueue, usage: ResourceList, deserved: ResourceList) -> tuple[float, float, float, str]:
    return (-queue.priority, share(usage, deserved), queue.created, queue.name)


def _turn(
    queue: FleetQueue,
    line: list[Candidate],
    usage: ResourceList,
    promised: ResourceList,
    capacity: ResourceList,
    waiting: dict[str, str],
    limit: ResourceList | None,
    preemptible: Sequence[tuple[int, ResourceList]] = (),
) -> Candidate | None:
    """A queue's turn: admit its first candidate that fits (within ``limit`` when given)."""
    for position, cand in enumerate(line):
        below = add(*(request for priority, request in preemptible if priority < cand.priority))
        reason = _blocker(queue, cand, usage, _minus(promised, below), capacity)
        over_share = limit is not None and not reason and not _le(add(usage, cand.request), limit)
        if not reason and not over_share:
            del line[position]
            return cand
        if reason:
            waiting[cand.name] = reason
        if queue.strict_fifo and not reason.startswith(INADMISSIBLE):  # what can never run heads no line
            for behind in line[position + 1 :]:
                waiting[behind.name] = f"queue {queue.name} is strict FIFO: waiting behind {cand.name}"
            return None
    return None


def _blocker(
    queue: FleetQueue, cand: Candidate, usage: ResourceList, promised: ResourceList, capacity: ResourceList
) -> str:
    if queue.state != "Open":
        return f"queue {queue.name} is {queue.state}"
    for name, amount in sorted(cand.request.items()):
        if amount <= 0 or name in _UNQUOTED:
            continue
        cap = queue.capability.get(name)
        if cap is not None and cap > 0 and usage.get(name, 0.0) + amount > cap + _EPS:
            return (
                f"queue {queue.name} capability {name}: {_q(name, usage.get(name, 0.0))} used + "
                f"{_q(name, amount)} requested > {_q(name, cap)}"
            )
        whole = capacity.get(name, 0.0)
        if capacity and amount > whole + _EPS:  # before what is promised, which would hide it
            return f"{INADMISSIBLE}fleet {name}: {_q(name, amount)} requested, the whole fleet has {_q(name, whole)}"
        room = capacity.get(name, 0.0) - promised.get(name, 0.0)
        if amount > room + _EPS:
            return f"fleet {name}: {_q(name, amount)} requested, {_q(name, max(room, 0.0))} not yet promised"
    return ""


def _minus(promised: ResourceList, below: ResourceList) -> ResourceList:
    return {k: v - below.get(k, 0.0) for k, v in promised.items()}


def _q(name: str, amount: float) -> str:
    return format_quantity(name, amount)


def share(allocated: Mapping[str, float], deserved: Mapping[str, float]) -> float:
    """max over the deserved dimensions of allocated/deserved (0/0 = 0, x/0 = 1), as proportion."""
    result = 0.0
    for name, amount in deserved.items():
        used = allocated.get(name, 0.0)
        result = max(result, used / amount if amount > 0 else (0.0 if used <= 0 else 1.0))
    return result


def deserved_shares(
    queues: Mapping[str, FleetQueue], request: Mapping[str, ResourceList], total: ResourceList
) -> dict[str, ResourceList]:
    """Proportion's iterative weighted water-filling over the fleet's ``total``.

    ``request`` per queue is what it has plus what it waits for. Deserved never exceeds a
    queue's request or its real capability, and is at least its guarantee.
    """
    dims = sorted(total)
    real = {n: _real_capability(q, queues.values(), total) for n, q in queues.items()}
    deserved = {n: {d: 0.0 for d in dims} for n in queues}
    meet: set[str] = set()
    remaining = dict(total)
    while True:
        open_queues = [n for n in sorted(queues) if n not in meet]
        weight = sum(queues[n].weight for n in open_queues)
        if weight == 0:
            break
        before = dict(remaining)
        delta = {d: 0.0 for d in dims}
        for n in open_queues:
            old = deserved[n]
            new = {d: old[d] + before.get(d, 0.0) * queues[n].weight / weight for d in dims}
            new = {d: min(new[d], real[n].get(d, new[d]), request.get(n, {}).get(d, 0.0)) for d in dims}
            new = {d: max(new[d], queues[n].guarantee.get(d, 0.0)) for d in dims}
            if _le(request.get(n, {}), new) or all(abs(new[d] - old[d]) < _EPS for d in dims):
                meet.add(n)
            for d in dims:
                delta[d] += new[d] - old[d]
            deserved[n] = new
        remaining = {d: max(0.0, before.get(d, 0.0) - delta[d]) for d in dims}
        if all(remaining[d] < _EPS for d in dims if d != "pods") or remaining == before:
            break
    return deserved


def _real_capability(queue: FleetQueue, queues: Iterable[FleetQueue], total: ResourceList) -> ResourceList:
    guaranteed = add(*(q.guarantee for q in queues))
    real = {d: max(0.0, total[d] - guaranteed.get(d, 0.0)) + queue.guarantee.get(d, 0.0) for d in total}
    for d, cap in queue.capability.items():
        if cap > 0 and d in real:
            real[d] = min(real[d], cap)
    return real


def _le(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    return all(v <= b.get(k, 0.0) + _EPS for k, v in a.items() if k in b and k not in _UNQUOTED)
