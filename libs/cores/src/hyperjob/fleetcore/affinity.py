"""Cluster choice as a policy: Karmada's ``clusterAffinity`` of a replicated job, read over the
clusters' names and labels, and the HyperJob's data sets.

Required (``affinity_allows``): ``clusterNames``, ``exclude``, ``labelSelector``. Preferred
(``placement_scores``, ``by_preference``): the weights of the terms a cluster matches, then the
HyperJob's data sets it holds and its bandwidth to the others, order the clusters where the job
fits, never making one eligible.
Spread (``spread_order``, ``spread_candidates``, ``spread_violation``): the clusters chosen span
at least ``minGroups`` and at most ``maxGroups`` values of a label; a cluster without the label is
not eligible (``affinity_allows``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from hyperjob import api

from .model import ClusterCapacity


def affinity_allows(affinity: api.ClusterAffinity, name: str, labels: Mapping[str, str]) -> bool:
    """Karmada's ``ClusterAffinity`` on one cluster: named (when ``clusterNames`` is given), not
    excluded, matching ``labelSelector`` (every ``matchLabels`` pair and expression), and carrying
    every label a spread constraint groups by."""
    if (affinity.cluster_names and name not in affinity.cluster_names) or name in affinity.exclude:
        return False
    if not all(spread_group(s, name, labels) is not None for s in affinity.spread_constraints):
        return False
    return selector_matches(affinity.label_selector, labels)


def selector_matches(selector: api.LabelSelector | None, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return True
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    return all(_expression_holds(e, labels) for e in selector.match_expressions)


def _expression_holds(expr: api.LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(expr.key)
    if expr.operator == "In":
        return value is not None and value in expr.values
    if expr.operator == "NotIn":
        return value is None or value not in expr.values  # Kubernetes: a missing key is not in
    if expr.operator == "Exists":
        return value is not None
    return value is None  # DoesNotExist


def preference(affinity: api.ClusterAffinity | None, name: str, labels: Mapping[str, str]) -> int:
    """The sum of the weights of the preferred terms the cluster matches (0 without any)."""
    if affinity is None:
        return 0
    return sum(
        term.weight
        for term in affinity.preferred
        if (not term.preference.cluster_names or name in term.preference.cluster_names)
        and selector_matches(term.preference.label_selector, labels)
    )


Score = tuple[int, int, float]
"""How much placement prefers a cluster: the preferred terms' weight, then the data sets held, then
the bandwidth to the others (``data_nearness``)."""


def placement_scores(
    hyperjob: api.HyperJob, rj: api.ReplicatedJob, clusters: Mapping[str, ClusterCapacity]
) -> dict[str, Score]:
    """Per cluster, what placement prefers among the clusters where the job fits: more weight of
    the ``clusterAffinity.preferred`` terms it matches, then nearness to the data sets the
    HyperJob reads (``spec.dataSets``; ``data_nearness``)."""
    wanted = set(hyperjob.spec.data_sets)
    return {
        name: (preference(rj.cluster_affinity, name, cap.labels), *data_nearness(wanted, cap))
        for name, cap in clusters.items()
    }


def data_nearness(wanted: set[str], cluster: ClusterCapacity) -> tuple[int, float]:
    """How near a cluster is to the data sets a HyperJob reads: how many it holds (its declared
    ``dataSets``), then its slowest link to the others (``dataLinks``, Gb/s; 0 when it has none
    to one of them, unbounded when it holds them all). Reading crosses every link, so the slowest
    bounds it."""
    held = wanted.intersection(cluster.data_sets)
    links = [cluster.data_links.get(name, 0.0) for name in wanted - held]
    return len(held), min(links, default=math.inf)


def most_preferred(score: Score | None) -> tuple[float, ...]:
    """A sort key: the most preferred first."""
    return tuple(-v for v in score or ())


def by_preference(names: Sequence[str], scores: Mapping[str, Score]) -> list[str]:
    """``names`` most preferred first; a stable sort keeps the given order among equals."""
    return sorted(names, key=lambda n: most_preferred(scores.get(n)))


def spread_group(spread: api.SpreadConstraint, name: str, labels: Mapping[str, str]) -> str | None:
    """The value the constraint groups this cluster by (None: the cluster lacks the label)."""
    if spread.spread_by_field == "cluster":
        return name
    return labels.get(spread.spread_by_field or spread.spread_by_label)


def _spreads(affinity: api.ClusterAffinity | None) -> list[api.SpreadConstraint]:
    return list(affinity.spread_constraints) if affinity is not None else []


def min_clusters(affinity: api.ClusterAffinity | None) -> int:
    """The fewest clusters a plan may use: every ``minGroups`` needs that many clusters."""
    return max((s.min_groups for s in _spreads(affinity)), default=1)


def spread_order(
    names: Sequence[str], affinity: api.ClusterAffinity | None, clusters: Mapping[str, ClusterCapacity]
) -> list[str]:
    """``names`` (best first) arranged so that every prefix of ``min_clusters`` or more clusters
    meets the spread constraints where the list can: the best cluster of each new group comes
    first until ``minGroups`` groups are covered, and clusters beyond the first ``maxGroups``
    groups are left out."""
    order = list(names)
    for spread in _spreads(affinity):
        group = {n: spread_group(spread, n, clusters[n].labels) for n in order}
        kept = list(dict.fromkeys(group[n] for n in order))[: spread.max_groups or None]
        order = [n for n in order if group[n] in kept]
        leaders = [next(n for n in order if group[n] == g) for g in kept[: spread.min_groups]]
        order = leaders + [n for n in order if n not in leaders]
    return order


def spread_candidates(
    names: Sequence[str],
    used: Sequence[str],
    affinity: api.ClusterAffinity | None,
    clusters: Mapping[str, ClusterCapacity],
) -> list[str]:
    """Where the next child of a fan-out may go given the clusters ``used``: a new group while
    fewer than ``minGroups`` are used, a used group once ``maxGroups`` are."""
    candidates = list(names)
    for spread in _spreads(affinity):
        groups = {spread_group(spread, u, clusters[u].labels) for u in used if u in clusters}
        group = {n: spread_group(spread, n, clusters[n].labels) for n in candidates}
        if len(groups) < spread.min_groups:
            candidates = [n for n in candidates if group[n] not in groups]
        elif spread.max_groups is not None and len(groups) >= spread.max_groups:
            candidates = [n for n in candidates if group[n] in groups]
    return candidates


def spread_violation(
    chosen: Sequence[str], affinity: api.ClusterAffinity | None, clusters: Mapping[str, ClusterCapacity]
) -> str | None:
    """Which spread constraint the clusters ``chosen`` break, in words; None when all hold."""
    for i, spread in enumerate(_spreads(affinity)):
        groups = sorted({g for n in chosen if n in clusters and (g := spread_group(spread, n, clusters[n].labels))})
        by = spread.spread_by_field or spread.spread_by_label
        span = f"{len(groups)} {by} value(s) ({', '.join(groups) or 'none'})"
        if len(groups) < spread.min_groups:
            return f"spreadConstraints[{i}]: needs at least {spread.min_groups} {by} value(s), can span {span}"
        if spread.max_groups is not None and len(groups) > spread.max_groups:
            return f"spreadConstraints[{i}]: allows at most {spread.max_groups} {by} value(s), the plan spans {span}"
    return None
