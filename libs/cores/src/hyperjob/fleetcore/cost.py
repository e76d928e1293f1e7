"""What a plan costs: a cluster may declare its price per resource-hour (``ClusterCapacity.prices``:
``cpu`` per core, ``memory`` per GiB, any other resource, e.g. ``nvidia.com/gpu``, per unit).

A resource a priced cluster does not name costs nothing there (``pods``, say); a cluster that
declares no price at all has no known cost: ``splitPolicy.prefer: cost`` uses it only after every
priced cluster, and a plan that uses it has no estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import combinations

from hyperjob import api

from .capacity import task_shape

GIB = float(1 << 30)
UNPRICED = float("inf")


def pod_cost(request: Mapping[str, float], prices: Mapping[str, float]) -> float:
    """One pod's price per hour on a cluster with these ``prices`` (``UNPRICED`` without any)."""
    if not prices:
        return UNPRICED
    return sum(amount / (GIB if name == "memory" else 1.0) * prices.get(name, 0.0) for name, amount in request.items())


def child_cost(spec: api.JobSpec, tasks: Mapping[str, int], prices: Mapping[str, float]) -> float:
    """A child's price per hour: ``tasks`` (task name → replicas) of the template ``spec``."""
    shapes = {t.name: task_shape(t) for t in spec.tasks}
    return sum(n * pod_cost(shapes[name].request, prices) for name, n in tasks.items() if n > 0)


def plan_cost(
    hyperjob: api.HyperJob,
    children: Iterable[tuple[str, str, Mapping[str, int]]],
    prices: Mapping[str, Mapping[str, float]],
) -> float | None:
    """The whole job's estimated price per hour: ``children`` are (replicated job, cluster, tasks),
    ``prices`` each cluster's. None without children, or when one is unplaced or on a cluster
    without prices (no honest estimate)."""
    specs = {rj.name: rj.template_spec for rj in hyperjob.spec.replicated_jobs}
    total, counted = 0.0, 0
    for replicated_job, cluster, tasks in children:
        spec = specs.get(replicated_job)
        if spec is None or not prices.get(cluster):
            return None
        total += child_cost(spec, tasks, prices[cluster])
        counted += 1
    return total if counted else None


# Sets of clusters tried by ``cheapest_split``: the cheapest this many (2^10 sets at most).
MAX_COST_CANDIDATES = 10


def cheapest_split(
    units: int,
    room: Mapping[str, int],
    unit_price: Mapping[str, float],
    price: Callable[[list[tuple[str, int]]], float],
    *,
    limit: int,
    fewest: int = 1,
    allowed: Callable[[Sequence[str]], bool] = lambda _: True,
) -> list[tuple[str, int]] | None:
    """The split of ``units`` whose ``price`` is least, among every set of ``fewest`` to ``limit``
    clusters that ``allowed`` accepts and whose ``room`` holds the job (None: no such set).

    A set is filled cheapest cluster first (``unit_price``), each up to its room, every cluster
    of the set given at least one unit; a tie goes to fewer clusters, then to the order of
    ``room`` (the caller's preference). Exact for the clusters tried when a unit costs alike
    wherever it lands in the template (one task shape): a job's price is then the sum of its
    units', so the cheapest plan is some set filled this way."""
    ranked = sorted((n for n in room if room[n] > 0), key=lambda n: unit_price[n])[:MAX_COST_CANDIDATES]
    best: tuple[float, list[tuple[str, int]]] | None = None
    for k in range(fewest, min(limit, len(ranked), units) + 1):
        for subset in combinations(ranked, k):  # each keeps the price order: cheapest first
            if sum(room[n] for n in subset) < units or not allowed(subset):
                continue
            parts = _fill(units, subset, room)
            cost = price(parts)
            if best is None or cost < best[0]:
                best = (cost, parts)
    return best[1] if best else None


def _fill(units: int, subset: Sequence[str], room: Mapping[str, int]) -> list[tuple[str, int]]:
    counts = dict.fromkeys(subset, 1)
    left = units - len(subset)
    for name in subset:
        take = min(left, room[name] - 1)
        counts[name] += take
        left -= take
    return list(counts.items())
