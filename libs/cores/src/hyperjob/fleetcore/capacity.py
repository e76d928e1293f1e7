"""Pod shapes and whole-gang fit checks against cluster capacity summaries.

A child job lands on a cluster only when every one of its pods can be put on a node at once
(first-fit decreasing over the summary's nodes); a summary without nodes is checked by sums.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import msgspec

from hyperjob import api
from hyperjob.api.quantity import ResourceList, add, parse_resource_list, scale
from hyperjob.events.cluster import VARIED_LABEL

from .model import DEFAULT_PODS_PER_NODE, ClusterCapacity, NodeCapacity

_EPS = 1e-9


class PodShape(msgspec.Struct, frozen=True, kw_only=True):
    """What one pod of a task asks for and where it may go."""

    request: ResourceList
    node_selector: dict[str, str] = {}
    affinity_terms: tuple[api.pod.NodeSelectorTerm, ...] = ()
    tolerations: tuple[api.Toleration, ...] = ()


def task_shape(task: api.TaskSpec) -> PodShape:
    """The pod of a task: Kubernetes' effective request (containers summed, init containers max'ed,
    a request defaulting to the limit) plus one ``pods`` slot."""
    spec = task.template.spec
    request = add(*(_container_request(c) for c in spec.containers))
    for init in spec.init_containers:
        for name, amount in _container_request(init).items():
            request[name] = max(request.get(name, 0.0), amount)
    request["pods"] = 1.0
    affinity = spec.affinity.node_affinity if spec.affinity else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
    return PodShape(
        request=request,
        node_selector=dict(spec.node_selector),
        affinity_terms=tuple(required.node_selector_terms) if required else (),
        tolerations=tuple(spec.tolerations),
    )


def _container_request(container: api.Container) -> ResourceList:
    limits = parse_resource_list(container.resources.limits)
    requests = parse_resource_list(container.resources.requests)
    return {**limits, **requests}


def spec_request(spec: api.JobSpec) -> ResourceList:
    """Every replica of every task of a job spec (admission counts every task, not the first)."""
    return add(*(scale(task_shape(t).request, t.replicas) for t in spec.tasks))


def hyperjob_request(hyperjob: api.HyperJob) -> ResourceList:
    """The whole HyperJob: each replicated job's template times its fan-out (1 with a split)."""
    parts = []
    for rj in hyperjob.spec.replicated_jobs:
        copies = 1 if rj.split_policy is not None else rj.replicas
        parts.append(scale(spec_request(rj.template_spec), copies))
    return add(*parts)


def node_matches(shape: PodShape, labels: Mapping[str, str], taints: Iterable[api.Taint] = ()) -> bool:
    """Node selector, required node affinity (any term) and NoSchedule/NoExecute taints."""
    if any(labels.get(k) not in (v, VARIED_LABEL) for k, v in shape.node_selector.items()):
        return False
    if shape.affinity_terms and not any(_term_matches(t, labels) for t in shape.affinity_terms):
        return False
    return all(
        taint.effect == "PreferNoSchedule" or any(_tolerates(t, taint) for t in shape.tolerations) for taint in taints
    )


def _term_matches(term: api.pod.NodeSelectorTerm, labels: Mapping[str, str]) -> bool:
    for req in term.match_expressions:
        value = labels.get(req.key)
        if value == VARIED_LABEL:
            continue  # nodes of many values stand behind this class: some may match
        ok = {
            "In": value is not None and value in req.values,
            "NotIn": value is None or value not in req.values,
            "Exists": value is not None,
            "DoesNotExist": value is None,
            "Gt": value is not None and _num(value) > _num(req.values[0] if req.values else ""),
            "Lt": value is not None and _num(value) < _num(req.values[0] if req.values else ""),
        }[req.operator]
        if not ok:
            return False
    return True


def _num(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _tolerates(toleration: api.Toleration, taint: api.Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.operator == "Exists":
        return not toleration.key or toleration.key == taint.key
    return toleration.key == taint.key and toleration.value == taint.value


def _free(node: NodeCapacity) -> ResourceList:
    free = dict(node.free)
    free.setdefault("pods", DEFAULT_PODS_PER_NODE)
    return free


def _allocatable(node: NodeCapacity) -> ResourceList:
    return {"pods": DEFAULT_PODS_PER_NODE, **node.allocatable}


_UNBOUNDED = 1 << 30  # pods "without limit": a request of nothing, or of a vanishing amount


def _units(request: Mapping[str, float], free: Mapping[str, float]) -> int:
    """How many pods of ``request`` fit in ``free`` (a missing dimension is zero). A vanishing
    amount (``cpu: 1e-320``) divides to infinity: it bounds nothing, as no amount would."""
    counts = [
        math.floor(min((free.get(name, 0.0) + _EPS) / amount, _UNBOUNDED))
        for name, amount in request.items()
        if amount > 0
    ]
    return max(0, min(counts)) if counts else _UNBOUNDED


def _usable_nodes(cluster: ClusterCapacity, shape: PodShape) -> list[NodeCapacity]:
    return [n for n in cluster.nodes if n.ready and node_matches(shape, n.labels, n.taints)]


def max_replicas(cluster: ClusterCapacity, shape: PodShape) -> int:
    """How many pods of one shape the cluster can take now (summed node by node)."""
    if not cluster.nodes:
        request = {k: v for k, v in shape.request.items() if k != "pods"}
        return _units(request, cluster.free) if node_matches(shape, cluster.labels) else 0
    return sum(_units(shape.request, _free(n)) * n.count for n in _usable_nodes(cluster, shape))


def could_ever_host(cluster: ClusterCapacity, shape: PodShape) -> bool:
    """True when some node (or the cluster's total) could hold one such pod when empty."""
    if not cluster.nodes:
        request = {k: v for k, v in shape.request.items() if k != "pods"}
        return node_matches(shape, cluster.labels) and _units(request, cluster.allocatable) >= 1
    return any(
        _units({k: v for k, v in shape.request.items() if k != "pods"}, n.allocatable) >= 1
        for n in _usable_nodes(cluster, shape)
    )


def gang_pods(spec: api.JobSpec, tasks: Mapping[str, int]) -> list[PodShape]:
    """The pods of a child: ``tasks`` maps task name → replicas."""
    pods: list[PodShape] = []
    for task in spec.tasks:
        pods.extend([task_shape(task)] * tasks.get(task.name, 0))
    return pods


def place_gang(cluster: ClusterCapacity, pods: Sequence[PodShape]) -> ClusterCapacity | str:
    """Put every pod at once (first-fit decreasing); the capacity left, or why it does not fit.

    Identical pods are placed in bulk (each node takes as many as fit before the next is tried),
    which is what pod-by-pod first fit does, in O(shapes × node classes): a class of alike nodes
    splits into the nodes it filled, the one it half filled, and the ones it did not touch. Classes
    left alike are merged again (``merge_classes``), so a capacity that takes gang after gang (a
    round's working copy) keeps as few classes as the cluster has kinds of node, not one more per gang.
    """
    if not cluster.nodes:
        return _place_by_sums(cluster, pods)
    nodes = list(cluster.nodes)
    for shape, count in sorted(_group(pods), key=lambda sc: _size_key(sc[0].request)):
        placed: list[NodeCapacity] = []
        for node in nodes:
            if count and node.ready and node_matches(shape, node.labels, node.taints):
                taken, count = _take(node, shape.request, count)
                placed += taken
            else:
                placed.append(node)
        nodes = merge_classes(placed)
        if count:
            return _shortfall(cluster, pods)
    return msgspec.structs.replace(cluster, nodes=tuple(nodes), free=_minus(cluster.free, _total(pods)))


def merge_classes(nodes: Sequence[NodeCapacity]) -> list[NodeCapacity]:
    """Alike classes (same free room, allocatable, labels, taints and readiness) as one, counts
    summed, each where the first of them was; a merged class keeps its first member's name."""
    merged: dict[tuple[object, ...], int] = {}
    result: list[NodeCapacity] = []
    for node in nodes:
        key = _class_key(node)
        at = merged.get(key)
        if at is None:
            merged[key] = len(result)
            result.append(node)
        else:
            result[at] = msgspec.structs.replace(result[at], count=result[at].count + node.count)
    return result


def _class_key(node: NodeCapacity) -> tuple[object, ...]:
    return (
        tuple(sorted(node.free.items())),
        tuple(sorted(node.allocatable.items())),
        tuple(sorted(node.labels.items())),
        node.taints,
        node.ready,
    )


def _take(node: NodeCapacity, request: Mapping[str, float], count: int) -> tuple[list[NodeCapacity], int]:
    """Place up to ``count`` pods of ``request`` on a class, node after node; (the class as it
    is now, split where needed, and the pods still to place)."""
    each = _units(request, _free(node))
    if each == 0:
        return [node], count
    full = min(node.count, count // each)
    rest = count - full * each
    partial = 1 if rest and full < node.count else 0
    parts = []
    if full:
        parts.append(msgspec.structs.replace(node, count=full, free=_minus(node.free, scale(request, each))))
    if partial:
        parts.append(msgspec.structs.replace(node, count=1, free=_minus(node.free, scale(request, rest))))
    untouched = node.count - full - partial
    if untouched:
        parts.append(msgspec.structs.replace(node, count=untouched))
    return parts, count - full * each - (rest if partial else 0)


def _group(pods: Sequence[PodShape]) -> list[tuple[PodShape, int]]:
    """(shape, count) in first-seen order; shapes hold dicts, so they are compared, not hashed."""
    shapes: list[PodShape] = []
    counts: list[int] = []
    for pod in pods:
        for i, shape in enumerate(shapes):
            if shape is pod or shape == pod:
                counts[i] += 1
                break
        else:
            shapes.append(pod)
            counts.append(1)
    return list(zip(shapes, counts, strict=True))


def _place_by_sums(cluster: ClusterCapacity, pods: Sequence[PodShape]) -> ClusterCapacity | str:
    if any(not node_matches(p, cluster.labels) for p in pods):
        return f"cluster {cluster.name} has no node matching the pods' node selector"
    need = {k: v for k, v in _total(pods).items() if k != "pods"}
    if _units(need, cluster.free) < 1:
        return _shortfall(cluster, pods)
    return msgspec.structs.replace(cluster, free=_minus(cluster.free, need))


def _shortfall(cluster: ClusterCapacity, pods: Sequence[PodShape]) -> str:
    """Name the resources the cluster lacks (what it can never give, when the gang asks more than
    it has at all), or say the free capacity is fragmented."""
    need = _total(pods)
    free = _room(cluster, pods, _free)
    lacking = [
        name
        for name in sorted(need, key=_scarcity_order)
        if (cluster.nodes or name != "pods") and need[name] > free.get(name, 0.0) + _EPS
    ]
    if not lacking:
        return (
            f"cluster {cluster.name} cannot fit all {len(pods)} pods at once on its nodes (free capacity is fragmented)"
        )
    fmt = api.quantity.format_quantity
    allocatable = _room(cluster, pods, _allocatable)
    never = [n for n in lacking if need[n] > allocatable.get(n, 0.0) + _EPS]
    if never:
        return f"cluster {cluster.name} can never hold it: " + ", ".join(
            f"{n}: needs {fmt(n, need[n])}, allocatable {fmt(n, allocatable.get(n, 0.0))}" for n in never
        )
    return f"cluster {cluster.name} lacks " + "; ".join(
        f"{n}: needs {fmt(n, need[n])}, free {fmt(n, free.get(n, 0.0))}" for n in lacking
    )


def _room(
    cluster: ClusterCapacity, pods: Sequence[PodShape], of: Callable[[NodeCapacity], Mapping[str, float]]
) -> ResourceList:
    """The cluster's total of ``of`` (free or allocatable) over the nodes the pods may use."""
    if not cluster.nodes:
        return dict(cluster.free if of is _free else cluster.allocatable)
    return add(*(scale(of(n), n.count) for n in _usable_nodes(cluster, pods[0]))) if pods else {}


def gang_never_fits(cluster: ClusterCapacity, pods: Sequence[PodShape]) -> bool:
    """True when the gang asks more than the cluster has at all, even empty (Kueue's inadmissible):
    a pod no node could ever hold, or a total above the allocatable of the nodes it may use."""
    if not all(could_ever_host(cluster, shape) for shape, _ in _group(pods)):
        return True
    need = _total(pods)
    allocatable = _room(cluster, pods, _allocatable)
    return any(need[n] > allocatable.get(n, 0.0) + _EPS for n in need if n != "pods" or cluster.nodes)


def _scarcity_order(name: str) -> tuple[int, str]:
    # Accelerators and other scalars first: they are what a user reads the reason for.
    return ({"cpu": 1, "memory": 2, "pods": 3}.get(name, 0), name)


def _total(pods: Sequence[PodShape]) -> ResourceList:
    return add(*(p.request for p in pods))


def _minus(free: Mapping[str, float], used: Mapping[str, float]) -> ResourceList:
    result = dict(free)
    for name, amount in used.items():
        if name in result:
            result[name] = result.get(name, 0.0) - amount
    return result


def _size_key(request: Mapping[str, float]) -> tuple[float, ...]:
    # Largest accelerators first, then cpu, then memory: the scarce dimensions decide a fit.
    scalars = sorted(k for k in request if k not in ("cpu", "memory", "pods"))
    return tuple([-request.get(k, 0.0) for k in scalars] + [-request.get("cpu", 0.0), -request.get("memory", 0.0)])
