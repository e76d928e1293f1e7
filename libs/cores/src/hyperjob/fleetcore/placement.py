"""Cluster choice for a plain Volcano Job (not part of a HyperJob) through the global-scheduler."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hyperjob import api

from .capacity import PodShape, could_ever_host, gang_pods
from .model import ClusterCapacity, Waiting, live_clusters
from .split import choose_cluster

# How a request to plan a HyperJob again begins when a child waits for room on the cluster it was
# planned on while another cluster has room (``GangRetry.reason``): the splitter replaces the
# children only if the new plan moves them.
ROOM_RETRY = "planned again for room: "


def place_job(
    spec: api.JobSpec,
    clusters: Mapping[str, ClusterCapacity],
    now: float | None = None,
    *,
    cluster_names: Sequence[str] = (),
    cluster_labels: Mapping[str, str] | None = None,
    wait_for_fit: bool = False,
) -> str | Waiting:
    """The cluster for a plain job: where its whole gang fits now (most room first, then name).

    When none fits now, the live cluster with the most room that could ever host it — so the
    cluster's own Volcano queueing, preemption and reclaim decide, exactly as with one cluster —
    unless ``wait_for_fit``, which returns ``Waiting`` instead. ``cluster_names`` and
    ``cluster_labels`` restrict the eligible set. ``Waiting`` also when no live cluster could ever
    host a pod of it — except when exactly one cluster is eligible: the job lands there, where
    Volcano keeps what cannot fit Pending (and its PodPending policies apply), as with one cluster.
    """
    live = live_clusters(clusters, now)
    labels = dict(cluster_labels or {})
    names = [
        n
        for n in (cluster_names or list(live))
        if n in live and all(live[n].labels.get(k) == v for k, v in labels.items())
    ]
    pods = gang_pods(spec, {t.name: t.replicas for t in spec.tasks})
    hosts = [n for n in names if all(could_ever_host(live[n], p) for p in _distinct(pods))]
    if not hosts and len(names) == 1 and not wait_for_fit:
        return names[0]
    if not hosts:
        return Waiting(reason="no live cluster can ever host this job's pods" if names else "no eligible cluster")
    working = dict(live)
    chosen = choose_cluster(pods, hosts, working)
    if chosen is not None:
        return chosen
    if wait_for_fit:
        return Waiting(reason="no cluster fits the whole gang now")
    fallback = choose_cluster(pods, hosts, working, check_fit=False)
    assert fallback is not None
    return fallback


def _distinct(pods: Sequence[PodShape]) -> list[PodShape]:
    seen: list[PodShape] = []
    for pod in pods:
        if pod not in seen:
            seen.append(pod)
    return seen
