"""Coordinated preemption across clusters: may a gang that free room cannot hold run on the room
lower-priority work gives back, and at the cost of which pods?

Pure: ``plan_preemption`` weighs, per cluster, the pods Volcano's rules would let the gang evict
(``victim_allowed``: lower priority, ``volcano.sh/preemptable`` not false, the victim's queue the
gang's own (preempt) or reclaimable (reclaim), and never a job below its ``minAvailable``: gang's
``Preemptable``), chooses a cluster for every child of the gang, and answers one
``PreemptionPlan`` only if every child can then be placed. Otherwise it answers why not, and
nothing is evicted anywhere: all or nothing across clusters. Victims are chosen to destroy the
least work (GPU-seconds already run, then pods, then lower priority, then name), and a victim set
is pruned to what the child needs (Volcano's reclaim takes nothing a node does not need).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from hyperjob.api.quantity import ResourceList

from .capacity import PodShape, place_gang
from .model import ClusterCapacity, NodeCapacity

GPU = "nvidia.com/gpu"


class RunningPod(msgspec.Struct, frozen=True, kw_only=True):
    """A pod bound to ``node`` (its request), as a victim candidate."""

    name: str
    node: str
    request: ResourceList
    preemptable: bool = True


class RunningJob(msgspec.Struct, frozen=True, kw_only=True):
    """A job running on ``cluster`` whose pods could give room back; ``running_since`` is when
    it started there (driver time), what its pods' work is measured from."""

    name: str
    cluster: str
    queue: str
    priority: int
    min_available: int
    running_since: float
    pods: tuple[RunningPod, ...]


class Preemptor(msgspec.Struct, frozen=True, kw_only=True):
    """The gang asking: its children (name → pods, each child whole on one cluster), its queue
    and priority, ``clusters``: child → the clusters it may use (any, when absent; a plan pins a
    child to one), and ``reclaimable``: queue → whether other queues may reclaim from it."""

    name: str
    queue: str
    priority: int
    children: dict[str, list[PodShape]]
    clusters: dict[str, list[str]] = {}
    reclaimable: dict[str, bool] = {}


class Eviction(msgspec.Struct, frozen=True, kw_only=True):
    """Pods of ``job`` on ``cluster`` to evict for the gang, and the work they lose (GPU-seconds)."""

    cluster: str
    job: str
    pods: tuple[str, ...]
    gpu_seconds: float


class PreemptionPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Where each child goes (``placements``) and what is evicted for it, all clusters together."""

    gang: str
    placements: dict[str, str]
    evictions: tuple[Eviction, ...]

    @property
    def gpu_seconds(self) -> float:
        return sum(e.gpu_seconds for e in self.evictions)

    def explain(self) -> str:
        """One line for the Events and the decision log."""
        where = ", ".join(f"{c} on {cl}" for c, cl in sorted(self.placements.items()))
        lost = "; ".join(
            f"{e.job} on {e.cluster}: {len(e.pods)} pod(s), {e.gpu_seconds:g} GPU-s" for e in self.evictions
        )
        return f"preempting for {self.gang} ({where}): {lost or 'nothing'}; {self.gpu_seconds:g} GPU-s of work lost"


def plan_preemption(
    gang: Preemptor, clusters: Mapping[str, ClusterCapacity], running: Sequence[RunningJob], now: float
) -> PreemptionPlan | str:
    """Choose a cluster for every child of ``gang`` and the victims that make room there; the plan,
    or why the gang cannot run even by preempting (then nothing is to be evicted).

    Children are taken largest first; each goes where it fits at the least cost (free room costs
    nothing; ties by cluster name), on what the children before it left. A cluster's victims are
    those of ``running`` on it that ``victim_allowed`` lets go; each job's pods are counted down
    from its running pods and never below its ``minAvailable``."""
    working = dict(clusters)
    spare = {job.name: len(job.pods) - job.min_available for job in running}
    taken: set[tuple[str, str]] = set()
    placements: dict[str, str] = {}
    evictions: list[Eviction] = []
    for child, pods in sorted(gang.children.items(), key=lambda kv: (-_gpus_of(kv[1]), kv[0])):
        best: tuple[tuple[float, int, str], str, ClusterCapacity, list[tuple[RunningJob, RunningPod]]] | None = None
        for name in sorted(working):
            if gang.clusters.get(child) and name not in gang.clusters[child]:
                continue
            candidates = [
                (job, pod)
                for job in running
                if job.cluster == name and victim_allowed(gang, job)
                for pod in job.pods
                if pod.preemptable and (job.name, pod.name) not in taken
            ]
            found = _room_for(working[name], pods, candidates, spare, now)
            if found is None:
                continue
            left, victims = found
            cost = (sum(_work(job, pod, now) for job, pod in victims), len(victims), name)
            if best is None or cost < best[0]:
                best = (cost, name, left, victims)
        if best is None:
            return f"child {child} fits no cluster even with every pod Volcano's rules let it preempt"
        _, name, left, victims = best
        placements[child] = name
        working[name] = left
        for job, pod in victims:
            spare[job.name] -= 1
            taken.add((job.name, pod.name))
        evictions.extend(_evictions(name, victims, now))
    return PreemptionPlan(gang=gang.name, placements=placements, evictions=_merged(evictions))


def victim_allowed(gang: Preemptor, job: RunningJob) -> bool:
    """Volcano's victim rules at the job level: lower priority (the priority plugin), and in the
    gang's own queue (preempt) or in another queue that is reclaimable (reclaim, default true)."""
    if job.priority >= gang.priority:
        return False
    return job.queue == gang.queue or gang.reclaimable.get(job.queue, True)


def _room_for(
    cluster: ClusterCapacity,
    pods: Sequence[PodShape],
    candidates: list[tuple[RunningJob, RunningPod]],
    spare: Mapping[str, int],
    now: float,
) -> tuple[ClusterCapacity, list[tuple[RunningJob, RunningPod]]] | None:
    """(the cluster after the child is placed, its victims): none when it fits free room; else
    victims added cheapest first until it fits, then each dropped again that it does not need."""
    placed = place_gang(cluster, pods)
    if not isinstance(placed, str):
        return placed, []
    chosen: list[tuple[RunningJob, RunningPod]] = []
    left = dict(spare)
    # Of victims losing alike work, those of one node together (the roomiest first): a pod needs
    # its room on one node, so victims spread over nodes would free much and fit nothing.
    room = {n.name: (-n.free.get(GPU, 0.0), i) for i, n in enumerate(cluster.nodes)}

    def order(jp: tuple[RunningJob, RunningPod]) -> tuple[float, tuple[float, int], int, str, str]:
        job, pod = jp
        return (_work(job, pod, now), room.get(pod.node, (0.0, len(room))), job.priority, job.name, pod.name)

    for job, pod in sorted(candidates, key=order):
        if left[job.name] <= 0:
            continue  # the gang plugin's Preemptable: never below minAvailable
        left[job.name] -= 1
        chosen.append((job, pod))
        if not isinstance(place_gang(_given_back(cluster, chosen), pods), str):
            break
    else:
        return None
    for victim in sorted(chosen, key=lambda jp: -_work(jp[0], jp[1], now)):
        fewer = [v for v in chosen if v is not victim]
        if not isinstance(place_gang(_given_back(cluster, fewer), pods), str):
            chosen = fewer
    placed = place_gang(_given_back(cluster, chosen), pods)
    assert not isinstance(placed, str)
    return placed, chosen


def given_back(cluster: ClusterCapacity, pods: Sequence[PodShape]) -> ClusterCapacity:
    """``cluster`` as it would be without ``pods`` (running there, on nodes not known): what a
    planner may count on for a gang that may preempt them (the exact victims are chosen later)."""
    running = RunningJob(
        name="", cluster=cluster.name, queue="", priority=0, min_available=0, running_since=0.0, pods=()
    )
    gone = [(running, RunningPod(name="", node="", request=p.request)) for p in pods]
    return _given_back(cluster, gone)


def _given_back(cluster: ClusterCapacity, victims: Sequence[tuple[RunningJob, RunningPod]]) -> ClusterCapacity:
    """The cluster as it is once ``victims`` are gone: each pod's request free again on its node."""
    nodes = list(cluster.nodes)
    free = dict(cluster.free)
    for _, pod in victims:
        free = _plus(free, pod.request)
        nodes = _give_back(nodes, pod)
    return msgspec.structs.replace(cluster, nodes=tuple(nodes), free=free)


def _give_back(nodes: list[NodeCapacity], pod: RunningPod) -> list[NodeCapacity]:
    """Free ``pod``'s request on its node: the node itself, or one split off the class its name
    heads (a summary lists alike nodes as one class named after the first). A pod whose node is
    not known (the fleet knows where a job runs, not on which node) gives its room back to the
    first Ready class it could have come from (one with that much taken)."""
    for i, node in enumerate(nodes):
        if node.name == pod.node or (not pod.node and node.ready and _could_hold(node, pod.request)):
            one = msgspec.structs.replace(node, count=1, free=_plus(node.free, pod.request))
            rest = [msgspec.structs.replace(node, name=f"{node.name}+", count=node.count - 1)] if node.count > 1 else []
            return [*nodes[:i], one, *rest, *nodes[i + 1 :]]
    return nodes  # a node the summary no longer lists (gone, or not Ready): no room comes back


def _could_hold(node: NodeCapacity, request: Mapping[str, float]) -> bool:
    """Whether ``request`` is taken on ``node`` now (free + request within allocatable)."""
    return all(
        node.free.get(k, 0.0) + v <= node.allocatable.get(k, 0.0) + 1e-9 for k, v in request.items() if k != "pods"
    )


def _evictions(cluster: str, victims: Sequence[tuple[RunningJob, RunningPod]], now: float) -> list[Eviction]:
    by_job: dict[str, list[tuple[RunningJob, RunningPod]]] = {}
    for job, pod in victims:
        by_job.setdefault(job.name, []).append((job, pod))
    return [
        Eviction(
            cluster=cluster,
            job=job,
            pods=tuple(sorted(p.name for _, p in pods)),
            gpu_seconds=sum(_work(j, p, now) for j, p in pods),
        )
        for job, pods in sorted(by_job.items())
    ]


def _merged(evictions: Sequence[Eviction]) -> tuple[Eviction, ...]:
    """One eviction per (cluster, job): two children may take pods of one job."""
    merged: dict[tuple[str, str], Eviction] = {}
    for e in evictions:
        before = merged.get((e.cluster, e.job))
        if before is not None:
            e = Eviction(
                cluster=e.cluster,
                job=e.job,
                pods=tuple(sorted({*before.pods, *e.pods})),
                gpu_seconds=before.gpu_seconds + e.gpu_seconds,
            )
        merged[(e.cluster, e.job)] = e
    return tuple(merged[k] for k in sorted(merged))


def _work(job: RunningJob, pod: RunningPod, now: float) -> float:
    """The work a pod loses when evicted: its GPUs times the seconds it has run."""
    return pod.request.get(GPU, 0.0) * max(0.0, now - job.running_since)


def _gpus_of(pods: Sequence[PodShape]) -> float:
    return sum(p.request.get(GPU, 0.0) for p in pods)


def _plus(free: Mapping[str, float], more: Mapping[str, float]) -> ResourceList:
    return {k: free.get(k, 0.0) + more.get(k, 0.0) for k in {*free, *more}}
