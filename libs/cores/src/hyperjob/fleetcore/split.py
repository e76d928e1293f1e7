"""Splitting a HyperJob into child jobs and choosing each child's cluster.

``plan_split`` is the one entry point; the per-mode helpers return ``[(cluster, replicas)]`` in
child order, and ``_cut`` turns replica counts into per-task counts (contiguous slices of the
template's replicas in task order, so global ranks stay contiguous across children).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hyperjob import api

from .affinity import (
    Score,
    affinity_allows,
    by_preference,
    min_clusters,
    most_preferred,
    placement_scores,
    spread_candidates,
    spread_order,
    spread_violation,
)
from .capacity import PodShape, could_ever_host, gang_never_fits, gang_pods, max_replicas, place_gang
from .cost import cheapest_split, child_cost
from .model import CLUSTER_SELECTOR_ANNOTATION, ChildPlan, ClusterCapacity, SplitPlan, Waiting, link, live_clusters
from .shares import (
    Parts,
    apportion,
    current_replicas,
    cut,
    granularity_of,
    keep_order,
    main_shape,
    scaled,
    units_of,
)


def plan_split(
    hyperjob: api.HyperJob,
    clusters: Mapping[str, ClusterCapacity],
    *,
    current: SplitPlan | None = None,
    now: float | None = None,
    check_fit: bool = True,
    waited: float | None = None,
) -> SplitPlan | Waiting:
    """Split every replicated job and put each child on a cluster where its whole gang fits now.

    Pure and deterministic. ``clusters`` are the latest capacity summaries; with ``now`` a cluster
    silent for 30 s is left out (``ready`` False always is). ``current`` is the plan in force
    (an update or scale): its children keep their clusters where the split allows, and only the
    replicas they add must fit. ``check_fit=False`` skips free-capacity checks for the fixed
    modes (explicit counts, static, weights, fan-out), e.g. to preview a split. ``waited`` is
    how long the HyperJob has waited since it was submitted, for ``dispatch: Incremental`` (None:
    every eligible cluster, as ``AllAtOnce``, e.g. to ask whether any plan could ever exist).
    Returns ``Waiting(reason)`` naming the replicated job and which cluster lacks what.
    """
    working = dict(live_clusters(clusters, now))
    children: list[ChildPlan] = []
    offset = 0
    for rj in hyperjob.spec.replicated_jobs:
        parts = _split_replicated_job(hyperjob, rj, working, current, check_fit, waited)
        if isinstance(parts, Waiting):
            return parts
        for index, (cluster, tasks) in enumerate(parts):
            replicas = sum(tasks.values())
            children.append(
                ChildPlan(
                    name=child_name(hyperjob.metadata.name, rj.name, index),
                    replicated_job=rj.name,
                    index=index,
                    cluster=cluster,
                    tasks=tasks,
                    replicas=replicas,
                    rank_offset=offset,
                    min_available=_child_min_available(rj, replicas),
                )
            )
            offset += replicas
    return SplitPlan(
        hyperjob=hyperjob.metadata.name,
        children=tuple(children),
        world_size=offset,
        generation=hyperjob.metadata.generation,
    )


def child_name(hyperjob: str, replicated_job: str, index: int) -> str:
    return f"{hyperjob}-{replicated_job}-{index}"


def _child_min_available(rj: api.ReplicatedJob, replicas: int) -> int:
    """ceil(child replicas × template minAvailable / template replicas); 0 keeps Volcano's default."""
    spec = rj.template_spec
    total = api.template_replicas(spec)
    if rj.split_policy is None or spec.min_available == 0 or total == 0:
        return spec.min_available
    return -(-replicas * spec.min_available // total)


def _split_replicated_job(
    hyperjob: api.HyperJob,
    rj: api.ReplicatedJob,
    working: dict[str, ClusterCapacity],
    current: SplitPlan | None,
    check_fit: bool,
    waited: float | None,
) -> list[tuple[str, dict[str, int]]] | Waiting:
    every = eligible_clusters(hyperjob, rj, working)
    eligible = dispatched(hyperjob, rj, every, working, waited)
    parts = _split_among(hyperjob, rj, eligible, working, current, check_fit)
    if isinstance(parts, Waiting) and len(eligible) < len(every):
        tried = f" (dispatch Incremental: {len(eligible)} of {len(every)} eligible clusters tried so far)"
        return Waiting(reason=parts.reason + tried, replicated_job=parts.replicated_job)
    return parts


def _split_among(
    hyperjob: api.HyperJob,
    rj: api.ReplicatedJob,
    eligible: list[str],
    working: dict[str, ClusterCapacity],
    current: SplitPlan | None,
    check_fit: bool,
) -> list[tuple[str, dict[str, int]]] | Waiting:
    split = rj.split_policy
    if split is None:
        return _fan_out(hyperjob, rj, eligible, working, current, check_fit)
    if split.clusters:
        counts: Parts | Waiting = _explicit(hyperjob, rj, working)
    elif split.mode == "auto":
        counts = _auto(hyperjob, rj, eligible, working, current)
    elif split.weights:
        counts = _weighted(hyperjob, rj, eligible)
    else:
        counts = _even(hyperjob, rj, eligible, working, current)
    if isinstance(counts, Waiting):
        return counts
    broken = spread_violation([c for c, _ in counts], rj.cluster_affinity, working)
    if broken is not None:
        return _waiting(hyperjob, rj, broken)
    parts = list(zip([c for c, _ in counts], cut(rj.template_spec, [n for _, n in counts]), strict=True))
    if check_fit or split.mode == "auto":
        for index, (cluster, tasks) in enumerate(parts):
            fitted = _fit(hyperjob, rj, index, cluster, tasks, working, current)
            if isinstance(fitted, Waiting):
                return fitted
    return parts


def eligible_clusters(
    hyperjob: api.HyperJob, rj: api.ReplicatedJob, clusters: Mapping[str, ClusterCapacity], now: float | None = None
) -> list[str]:
    """Clusters a replicated job may use, in preference order: the weight of the ``clusterAffinity``
    preferred terms each matches, most first, then ``clusterNames`` order, else by name.

    Eligible: live, named by ``clusterNames`` (when given), carrying the labels of the HyperJob's
    ``hyperjob.io/cluster-selector`` annotation (deprecated), allowed by the replicated job's
    ``clusterAffinity`` (``affinity_allows``), and with some node that could ever hold a pod of
    the main task (its node selector, e.g. the GPU model, and its per-pod request).
    With ``now`` a cluster silent for 30 s is not live; without it only ``ready`` counts.
    """
    clusters = live_clusters(clusters, now)
    names = list(rj.cluster_names) or sorted(clusters)
    selector = _cluster_selector(hyperjob)
    shape = main_shape(rj.template_spec)
    result = []
    for name in names:
        cap = clusters.get(name)
        if cap is None or any(cap.labels.get(k) != v for k, v in selector.items()):
            continue
        if rj.cluster_affinity is not None and not affinity_allows(rj.cluster_affinity, name, cap.labels):
            continue
        if could_ever_host(cap, shape):
            result.append(name)
    return by_preference(result, placement_scores(hyperjob, rj, clusters))


def dispatched(
    hyperjob: api.HyperJob,
    rj: api.ReplicatedJob,
    eligible: Sequence[str],
    working: Mapping[str, ClusterCapacity],
    waited: float | None,
) -> list[str]:
    """The eligible clusters a replicated job may try now (Kueue MultiKueue's dispatch): all of
    them (``AllAtOnce``, or ``waited`` None), or for ``Incremental`` the best ``initialClusters``
    by placement's order (preferred weights, data sets held, then room for the main task), and
    ``widenBy`` more for each whole ``widenAfter`` waited. The chosen keep the eligible order."""
    dispatch = hyperjob.spec.dispatch
    if dispatch.strategy == "AllAtOnce" or waited is None:
        return list(eligible)
    rounds = int(max(waited, 0.0) // api.parse_duration(dispatch.widen_after))
    shape, scores = main_shape(rj.template_spec), placement_scores(hyperjob, rj, working)
    roomiest = sorted(eligible, key=lambda n: -max_replicas(working[n], shape))
    best = by_preference(roomiest, scores)[: dispatch.initial_clusters + rounds * dispatch.widen_by]
    return [n for n in eligible if n in best]


def _cluster_selector(hyperjob: api.HyperJob) -> dict[str, str]:
    raw = hyperjob.metadata.annotations.get(CLUSTER_SELECTOR_ANNOTATION, "")
    pairs = [item.split("=", 1) for item in raw.split(",") if "=" in item]
    return {k.strip(): v.strip() for k, v in pairs}


# Kueue's word for a request that can never be admitted as the fleet is (larger than any cluster):
# said at once, so it does not wait silently for room that will never come.
INADMISSIBLE = "inadmissible: "


def _waiting(hyperjob: api.HyperJob, rj: api.ReplicatedJob, reason: str) -> Waiting:
    return Waiting(reason=f"replicatedJob {rj.name}: {reason}", replicated_job=rj.name)


def _explicit(hyperjob: api.HyperJob, rj: api.ReplicatedJob, working: Mapping[str, ClusterCapacity]) -> Parts | Waiting:
    assert rj.split_policy is not None
    counts = [(c.name, c.replicas) for c in rj.split_policy.clusters if c.replicas > 0]
    limit = hyperjob.spec.max_domains
    if limit is not None and len(counts) > limit:
        return _waiting(hyperjob, rj, f"splitPolicy.clusters uses {len(counts)} clusters, maxDomains is {limit}")
    for name, _ in counts:
        if name not in working:
            return _waiting(hyperjob, rj, f"cluster {name} is not reporting")
    return counts


def _even(
    hyperjob: api.HyperJob,
    rj: api.ReplicatedJob,
    eligible: Sequence[str],
    working: Mapping[str, ClusterCapacity],
    current: SplitPlan | None,
) -> Parts | Waiting:
    """Static: accelerators (equivalently replicas, in units of ``granularity``) as evenly as possible.

    When ``maxDomains`` leaves a choice, the eligible clusters that hold an even share now come
    first (in preference order), so a re-plan moves off a cluster that filled up."""
    eligible = spread_order(eligible, rj.cluster_affinity, working)
    if not eligible:
        return _waiting(hyperjob, rj, "no eligible cluster")
    k = min(hyperjob.spec.max_domains or len(eligible), len(eligible))
    units = apportion(units_of(rj), [1.0] * k)
    chosen = list(eligible)
    if k < len(eligible):
        shape, held, g = main_shape(rj.template_spec), current_replicas(current, rj.name), granularity_of(rj)
        room = {n: (max_replicas(working[n], shape) + held.get(n, 0)) // g for n in eligible}
        roomy_first = sorted(eligible, key=lambda n: room[n] < units[0])
        chosen = keep_order(spread_order(roomy_first, rj.cluster_affinity, working)[:k], current, rj.name)
    return scaled(rj, chosen, units)


def _weighted(hyperjob: api.HyperJob, rj: api.ReplicatedJob, eligible: Sequence[str]) -> Parts | Waiting:
    assert rj.split_policy is not None
    weights = rj.split_policy.weights
    named = [name for name in weights if weights[name] > 0 and name in eligible]
    # maxDomains keeps the heaviest clusters; a stable sort keeps the manifest order among equals.
    chosen = sorted(named, key=lambda n: -weights[n])[: hyperjob.spec.max_domains or None]
    chosen = [n for n in named if n in chosen]
    if not chosen:
        return _waiting(hyperjob, rj, "no eligible cluster has a weight")
    return scaled(rj, chosen, apportion(units_of(rj), [float(weights[n]) for n in chosen]))


def _auto(
    hyperjob: api.HyperJob,
    rj: api.ReplicatedJob,
    eligible: Sequence[str],
    working: Mapping[str, ClusterCapacity],
    current: SplitPlan | None,
) -> Parts | Waiting:
    """The fewest clusters (largest room first) that hold the job, shared in proportion to room.

    Among sets of as many clusters, the best-connected, then the most preferred (the affinity's
    preferred terms), then the roomiest; every set tried meets the spread constraints it can."""
    granularity = granularity_of(rj)
    shape = main_shape(rj.template_spec)
    held = current_replicas(current, rj.name)
    room = {name: (max_replicas(working[name], shape) + held.get(name, 0)) // granularity for name in eligible}
    if rj.split_policy is not None and rj.split_policy.prefer == "cost":
        return _cheapest(hyperjob, rj, room, working, current)
    scores = placement_scores(hyperjob, rj, working)
    roomiest = sorted(eligible, key=lambda n: (-room[n], n))
    ranked = by_preference(roomiest, scores)
    orders = [spread_order(o, rj.cluster_affinity, working) for o in (_by_bandwidth(ranked, working), ranked, roomiest)]
    limit = hyperjob.spec.max_domains or len(ranked)
    units = units_of(rj)
    for k in range(min_clusters(rj.cluster_affinity), min(limit, len(ranked)) + 1):
        # The best-connected set first (one job spanning clusters is as fast as its slowest link);
        # the most preferred, then the roomiest set when it cannot hold the job.
        for order in orders:
            if sum(room[n] for n in order[:k]) >= units:
                chosen = keep_order(order[:k], current, rj.name)
                caps = [room[n] for n in chosen]
                return scaled(rj, chosen, apportion(units, [float(c) for c in caps], caps))
    return _no_room(hyperjob, rj, ranked, room)


def _no_room(hyperjob: api.HyperJob, rj: api.ReplicatedJob, ranked: Sequence[str], room: Mapping[str, int]) -> Waiting:
    limit = hyperjob.spec.max_domains or len(ranked)
    granularity = granularity_of(rj)
    fits = ", ".join(f"{n} {room[n] * granularity}" for n in ranked[:limit]) or "none eligible"
    return _waiting(
        hyperjob, rj, f"needs {units_of(rj) * granularity} replicas in at most {limit} cluster(s); room now: {fits}"
    )


def _cheapest(
    hyperjob: api.HyperJob,
    rj: api.ReplicatedJob,
    room: Mapping[str, int],
    working: Mapping[str, ClusterCapacity],
    current: SplitPlan | None,
) -> Parts | Waiting:
    """``prefer: cost``: among the plans that fit (room, ``maxDomains``, spread constraints), the
    one whose whole job costs least by the clusters' declared prices."""
    spec, g, units = rj.template_spec, granularity_of(rj), units_of(rj)
    whole = {t.name: t.replicas for t in spec.tasks}

    def price(counts: list[tuple[str, int]]) -> float:
        cuts = cut(spec, [n * g for _, n in counts])
        return sum(child_cost(spec, tasks, working[c].prices) for (c, _), tasks in zip(counts, cuts, strict=True))

    chosen = cheapest_split(
        units,
        room,
        {n: child_cost(spec, whole, working[n].prices) / max(units, 1) for n in room},
        price,
        limit=hyperjob.spec.max_domains or len(room),
        fewest=min_clusters(rj.cluster_affinity),
        allowed=lambda names: spread_violation(names, rj.cluster_affinity, working) is None,
    )
    if chosen is None:
        return _no_room(hyperjob, rj, sorted(room, key=lambda n: (-room[n], n)), room)
    counts = dict(chosen)
    order = keep_order(list(counts), current, rj.name)
    return [(n, counts[n] * g) for n in order]


def _by_bandwidth(ranked: Sequence[str], working: Mapping[str, ClusterCapacity]) -> list[str]:
    """The roomiest cluster, then greedily the one with the best declared link to those chosen
    (the narrowest link counts), room and name breaking ties; the room order without links."""
    order = list(ranked[:1])
    rest = list(ranked[1:])
    while rest:
        best = min(rest, key=lambda n: (-min(link(working, n, c) for c in order), rest.index(n)))
        order.append(best)
        rest.remove(best)
    return order


def _fit(
    hyperjob: api.HyperJob,
    rj: api.ReplicatedJob,
    index: int,
    cluster: str,
    tasks: Mapping[str, int],
    working: dict[str, ClusterCapacity],
    current: SplitPlan | None,
) -> None | Waiting:
    """Check the gang of child ``index`` and take it from ``working``. Only what it adds to what this
    replicated job's current children already run on that cluster must fit (those pods are
    already in the cluster's summary)."""
    running: dict[str, int] = {}
    for child in current.children if current else ():
        if child.replicated_job == rj.name and child.cluster == cluster:
            for name, n in child.tasks.items():
                running[name] = running.get(name, 0) + n
    added = {name: n - running.get(name, 0) for name, n in tasks.items() if n > running.get(name, 0)}
    pods = gang_pods(rj.template_spec, added)
    placed = place_gang(working[cluster], pods)
    if isinstance(placed, str):
        # Inadmissible only when no cluster at all could hold it: another split might use another.
        never = all(gang_never_fits(c, pods) for c in working.values())
        member = f"child {child_name(hyperjob.metadata.name, rj.name, index)}: "  # a gang member: which one
        return _waiting(hyperjob, rj, member + (f"{INADMISSIBLE}{placed}" if never else placed))
    working[cluster] = placed
    return None


def _fan_out(
    hyperjob: api.HyperJob,
    rj: api.ReplicatedJob,
    eligible: Sequence[str],
    working: dict[str, ClusterCapacity],
    current: SplitPlan | None,
    check_fit: bool,
) -> list[tuple[str, dict[str, int]]] | Waiting:
    """No split policy: ``replicas`` identical children, packed onto as few clusters as fit."""
    tasks = {t.name: t.replicas for t in rj.template_spec.tasks if t.replicas > 0}
    pods = gang_pods(rj.template_spec, tasks)
    used: list[str] = []
    parts: list[tuple[str, dict[str, int]]] = []
    scores = placement_scores(hyperjob, rj, working)
    for index in range(rj.replicas):
        previous = current.child(child_name(hyperjob.metadata.name, rj.name, index)) if current else None
        allowed = spread_candidates(eligible, used, rj.cluster_affinity, working)
        if previous is not None and previous.cluster in working:
            cluster: str | None = previous.cluster  # already there: its pods are in the summary
        else:
            cluster = choose_cluster(pods, allowed, working, used, hyperjob.spec.max_domains, check_fit, scores)
        if cluster is None:
            spread = "under spreadConstraints: " if len(allowed) < len(eligible) else ""
            return _waiting(hyperjob, rj, f"child {index}: {spread}" + _why_not(pods, allowed, used, working, hyperjob))
        used += [] if cluster in used else [cluster]
        parts.append((cluster, dict(tasks)))
    broken = spread_violation(used, rj.cluster_affinity, working)
    return _waiting(hyperjob, rj, broken) if broken is not None else parts


def choose_cluster(
    pods: Sequence[PodShape],
    eligible: Sequence[str],
    working: dict[str, ClusterCapacity],
    used: Sequence[str] = (),
    max_domains: int | None = None,
    check_fit: bool = True,
    preference: Mapping[str, Score] | None = None,
) -> str | None:
    """The cluster for one child gang: clusters already used first (fewest clusters), then the
    most ``preference`` (the affinity's preferred weights, then the data sets held), then the best declared link to the
    clusters used, then the most room for the gang's pods, then the name.
    The chosen capacity is taken from ``working``."""
    allowed = [n for n in eligible if n in working and (max_domains is None or n in used or len(used) < max_domains)]
    shape = pods[0] if pods else PodShape(request={})

    def bandwidth(n: str) -> float:
        return min((link(working, n, u) for u in used if u != n), default=0.0)

    score = preference or {}
    ranked = sorted(
        allowed,
        key=lambda n: (n not in used, most_preferred(score.get(n)), -bandwidth(n), -max_replicas(working[n], shape), n),
    )
    for name in ranked:
        if not check_fit:
            return name
        placed = place_gang(working[name], pods)
        if not isinstance(placed, str):
            working[name] = placed
            return name
    return None


def _why_not(
    pods: Sequence[PodShape],
    eligible: Sequence[str],
    used: Sequence[str],
    working: Mapping[str, ClusterCapacity],
    hyperjob: api.HyperJob,
) -> str:
    if not eligible:
        return "no eligible cluster"
    reasons = [r for n in eligible if n in working and isinstance(r := place_gang(working[n], pods), str)]
    if not reasons and hyperjob.spec.max_domains is not None:
        return f"maxDomains {hyperjob.spec.max_domains} reached ({', '.join(used)})"
    if reasons and all(gang_never_fits(working[n], pods) for n in eligible if n in working):
        return f"{INADMISSIBLE}no cluster can ever hold it: " + "; ".join(reasons)
    return "; ".join(reasons) or "no eligible cluster"
