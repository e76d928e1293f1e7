"""How a replicated job's replicas are shared among the clusters a split chose: in units of
``granularity``, in proportion to weights (``apportion``), cut into contiguous slices of the
template's tasks (``cut``), children keeping their index on a re-plan (``keep_order``)."""

from __future__ import annotations

from collections.abc import Sequence

from hyperjob import api

from .capacity import PodShape, task_shape
from .model import SplitPlan

Parts = list[tuple[str, int]]


def main_shape(spec: api.JobSpec) -> PodShape:
    """The shape of the task with the most replicas; it measures a cluster's room in replicas."""
    task = max(spec.tasks, key=lambda t: t.replicas)
    return task_shape(task)


def keep_order(chosen: list[str], current: SplitPlan | None, replicated_job: str) -> list[str]:
    """On a re-plan, clusters that hold current children keep their child's index (so the child
    keeps its name and is updated in place, not recreated elsewhere); new clusters follow."""
    index = {c.cluster: c.index for c in (current.children if current else ()) if c.replicated_job == replicated_job}
    return sorted(chosen, key=lambda n: (index.get(n, len(chosen) + chosen.index(n)), chosen.index(n)))


def current_replicas(current: SplitPlan | None, replicated_job: str) -> dict[str, int]:
    held: dict[str, int] = {}
    for child in current.children if current else ():
        if child.replicated_job == replicated_job:
            held[child.cluster] = held.get(child.cluster, 0) + child.replicas
    return held


def granularity_of(rj: api.ReplicatedJob) -> int:
    return rj.split_policy.granularity if rj.split_policy else 1


def units_of(rj: api.ReplicatedJob) -> int:
    return api.template_replicas(rj.template_spec) // granularity_of(rj)


def scaled(rj: api.ReplicatedJob, chosen: Sequence[str], units: Sequence[int]) -> Parts:
    g = granularity_of(rj)
    return [(name, n * g) for name, n in zip(chosen, units, strict=True) if n > 0]


def apportion(total: int, weights: Sequence[float], caps: Sequence[int] | None = None) -> list[int]:
    """Split ``total`` in proportion to ``weights`` (largest remainder; ties go to the earlier entry).

    With ``caps`` (each ≥ its share, their sum ≥ total) no entry gets more than its cap.
    """
    weight_sum = sum(weights)
    if total <= 0 or weight_sum <= 0:
        return [0] * len(weights)
    exact = [total * w / weight_sum for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))
    left = total - sum(counts)
    for i in order * 2:  # a second pass only matters when caps turned an entry down
        if left == 0:
            break
        if caps is None or counts[i] < caps[i]:
            counts[i] += 1
            left -= 1
    return counts


def cut(spec: api.JobSpec, counts: Sequence[int]) -> list[dict[str, int]]:
    """Give child i the next ``counts[i]`` replicas of the template, tasks in template order."""
    remaining = [(t.name, t.replicas) for t in spec.tasks]
    parts: list[dict[str, int]] = []
    for count in counts:
        tasks: dict[str, int] = {}
        while count > 0:
            name, left = remaining[0]
            take = min(left, count)
            if take:
                tasks[name] = take
            count -= take
            remaining = [(name, left - take)] + remaining[1:] if left > take else remaining[1:]
        parts.append(tasks)
    return parts
